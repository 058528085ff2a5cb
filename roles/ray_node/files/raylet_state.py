"""Print whether this container runs a raylet: `running` or `gone`.

Run inside a Ray node's container (`docker exec -i ray-head python3 -`).
`ray start --block` (Ray 2.60) keeps running when its raylet exits with
status 0, which is how a drained raylet exits: the unit stays active while the
node has left the cluster. This tells the two apart.
"""
import pathlib


def cmdline(entry: pathlib.Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:  # the process ended while we looked
        return b""


raylet = any(b"/raylet/raylet\0" in cmdline(entry) for entry in pathlib.Path("/proc").iterdir()
             if entry.name.isdigit())
print("running" if raylet else "gone")
