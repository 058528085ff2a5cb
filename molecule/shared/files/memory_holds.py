"""Print, as one JSON line, which of the given byte strings a process holds in its writable memory.

Run on a node: `python3 - PID HEX... < this file`, each needle hex-encoded (so
that a secret looked for is not itself on a command line). It reads
/proc/PID/maps and, for every private writable mapping (heap, anonymous
arenas, stack: where Python keeps os.environ and every string it received),
/proc/PID/mem. An environment variable set inside a running process, as vLLM
does in its Ray workers, shows only there, never in /proc/PID/environ.
"""
import json
import sys

CHUNK = 64 << 20


def writable_regions(pid: str):
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if fields[1].startswith("rw") and (len(fields) < 6 or fields[5] in ("[heap]", "[stack]")):
                yield start, end


def holds(pid: str, needles: list[bytes]) -> dict[str, bool]:
    found = {needle: False for needle in needles}
    overlap = max(len(needle) for needle in needles)
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
        for start, end in writable_regions(pid):
            tail = b""
            for offset in range(start, end, CHUNK):
                try:
                    memory.seek(offset)
                    block = tail + memory.read(min(CHUNK, end - offset))
                except OSError:  # a region unmapped since maps was read
                    break
                for needle in found:
                    found[needle] = found[needle] or needle in block
                tail = block[-overlap:]
    return {needle.hex(): hit for needle, hit in found.items()}


if __name__ == "__main__":
    print(json.dumps(holds(sys.argv[1], [bytes.fromhex(line) for line in sys.argv[2:]])))
