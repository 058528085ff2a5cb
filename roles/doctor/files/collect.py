"""What a maintainer asks for in a bug report, from one node of dgx_spark.vllm (playbooks/doctor.yml).

Usage: python3 -c "<this file>" SETTINGS.json|-     (SETTINGS on stdin with "-")

SETTINGS: config_dir, units (the collection's units to show), expected_units (those that must be
active on this node), image, journal_lines, timeout (seconds any one command may take), mtu (the
fabric's), memory_pressure (PSI percent). Prints one JSON object: "report" (facts), "texts" (name ->
text: journals, env files, /proc files) and "findings" (what looks wrong, one line each).

Read-only: it starts nothing (no container; a running serving container is asked its vLLM version
with `docker exec`) and writes nothing. Every secret is redacted here, before anything leaves the
node: env values whose key names a secret, and any text equal to a value of the node's secret files
(the playbook scans the archive again on the controller). The playbooks pass this file through
Jinja as a lookup: it holds no double braces (so no Go template for docker either).
"""
from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from typing import Any

REDACTED = "REDACTED"
# Env keys whose values are secrets (VLLM_API_KEY, HF_TOKEN, RAY_AUTH_TOKEN, ...).
SECRET_KEY = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# Files of the config folder that hold secrets: read for their values, never sent.
SECRET_FILE = re.compile(r"secret|token", re.IGNORECASE)
# Shorter values are not secrets the collection writes, and replacing them would mangle the text.
MIN_SECRET_LENGTH = 6
# The env keys that name the fabric's interfaces (comma-separated; NCCL's "^" excludes, "=" is exact).
INTERFACE_KEYS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES")
FABRIC_ENV = re.compile(r"^(NCCL_|GLOO_|TP_|UCX_|VLLM_HOST_IP|MASTER_ADDR|MASTER_PORT)")
UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "NRestarts", "ExecMainStatus",
                   "ActiveEnterTimestamp", "InactiveEnterTimestamp", "StatusText", "MemoryCurrent",
                   "MemoryMax", "FragmentPath")
# `docker image inspect` labels that carry the vLLM version, first found.
VERSION_LABELS = ("vllm.version", "com.nvidia.vllm.version", "org.opencontainers.image.version")
ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "amd64": "amd64"}


# ---- secrets ------------------------------------------------------------------

def secret_values(texts: list[str]) -> set[str]:
    """Every value in these secret files' texts: each KEY=VALUE's value (unquoted as the shell
    would, and as written), else the whole stripped text (a token file)."""
    values: set[str] = set()
    for text in texts:
        assignments = [line.split("=", 1)[1].strip() for line in text.splitlines()
                       if re.match(r"^\s*(export\s+)?[A-Za-z_][A-Za-z0-9_]*=", line)]
        for raw in assignments:
            values.add(raw)
            try:
                values.update(shlex.split(raw))
            except ValueError:
                pass
        if not assignments:
            values.add(text.strip())
    return {value for value in values if len(value) >= MIN_SECRET_LENGTH}


def redact(text: str, secrets: set[str]) -> str:
    """The text with each secret value replaced (the longest first: one may contain another)."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def redact_tree(value: Any, secrets: set[str]) -> Any:
    """A JSON-like value with redact() applied to every string in it, keys included."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {redact(str(key), secrets): redact_tree(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_tree(item, secrets) for item in value]
    return value


def redact_env(text: str, secrets: set[str]) -> str:
    """An env file with the value of each key that names a secret replaced, then every secret value."""
    lines = []
    for line in text.splitlines():
        key, sep, _value = line.partition("=")
        if sep and SECRET_KEY.search(key):
            line = f"{key}={REDACTED}"
        lines.append(line)
    return redact("\n".join(lines) + ("\n" if text.endswith("\n") else ""), secrets)


def env_pairs(text: str) -> dict[str, str]:
    return {key.strip(): value.strip() for key, sep, value in
            (line.partition("=") for line in text.splitlines() if not line.lstrip().startswith("#")) if sep}


# ---- reading the node ---------------------------------------------------------

def read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def run(argv: list[str], timeout: float) -> tuple[int, str]:
    """(exit status, stdout or the error); 127 when the program is not on the node."""
    if not shutil.which(argv[0]):
        return 127, f"{argv[0]}: not installed"
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"{argv[0]}: no answer within {timeout:.0f} s"
    return result.returncode, result.stdout if result.returncode == 0 else (result.stderr or result.stdout)


def interfaces(sys_root: str = "/sys") -> dict[str, dict[str, Any]]:
    """Every network interface: state, MTU, speed (Mb/s; empty when down or virtual), driver, RDMA devices."""
    found = {}
    for path in sorted(glob.glob(f"{sys_root}/class/net/*")):
        name = os.path.basename(path)
        driver = os.path.realpath(f"{path}/device/driver") if os.path.exists(f"{path}/device/driver") else ""
        found[name] = {
            "operstate": read(f"{path}/operstate").strip(),
            "carrier": read(f"{path}/carrier").strip(),
            "mtu": read(f"{path}/mtu").strip(),
            "speed": read(f"{path}/speed").strip(),
            "address": read(f"{path}/address").strip(),
            "driver": os.path.basename(driver),
            "pci": os.path.basename(os.path.realpath(f"{path}/device")) if os.path.exists(f"{path}/device") else "",
            "rdma": sorted(os.listdir(f"{path}/device/infiniband")) if os.path.isdir(f"{path}/device/infiniband") else [],
        }
    return found


def rdma_devices(sys_root: str = "/sys") -> dict[str, dict[str, Any]]:
    """Every RDMA device: firmware, its interfaces, each port's state, rate and GIDs (what show_gids prints)."""
    found = {}
    for path in sorted(glob.glob(f"{sys_root}/class/infiniband/*")):
        ports = {}
        for port_path in sorted(glob.glob(f"{path}/ports/*")):
            gids = []
            for gid_path in sorted(glob.glob(f"{port_path}/gids/*"), key=lambda p: int(os.path.basename(p))):
                index = os.path.basename(gid_path)
                gid = read(gid_path).strip()
                if gid and gid.strip("0:"):
                    gids.append({"index": int(index), "gid": gid,
                                 "type": read(f"{port_path}/gid_attrs/types/{index}").strip(),
                                 "netdev": read(f"{port_path}/gid_attrs/ndevs/{index}").strip()})
            ports[os.path.basename(port_path)] = {
                "state": read(f"{port_path}/state").strip(), "phys_state": read(f"{port_path}/phys_state").strip(),
                "rate": read(f"{port_path}/rate").strip(), "link_layer": read(f"{port_path}/link_layer").strip(),
                "gids": gids}
        found[os.path.basename(path)] = {
            "fw_ver": read(f"{path}/fw_ver").strip(), "board_id": read(f"{path}/board_id").strip(),
            "netdevs": sorted(os.listdir(f"{path}/device/net")) if os.path.isdir(f"{path}/device/net") else [],
            "ports": ports}
    return found


def firmware(nets: dict[str, dict[str, Any]], timeout: float) -> dict[str, str]:
    """`ethtool -i` of each interface on a device (driver, firmware), when ethtool is there."""
    return {name: run(["ethtool", "-i", name], timeout)[1] for name, net in nets.items() if net["pci"]}


def nvidia(timeout: float) -> dict[str, str]:
    rc, smi = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,memory.used",
                   "--format=csv,noheader"], timeout)
    return {"driver": read("/proc/driver/nvidia/version").strip(), "nvidia_smi": smi.strip() if rc != 127 else ""}


def psi() -> dict[str, dict[str, float]]:
    """/proc/pressure/<resource>: "some"/"full" -> avg10/avg60/avg300 (percent)."""
    found: dict[str, dict[str, float]] = {}
    for resource in ("memory", "cpu", "io"):
        for line in read(f"/proc/pressure/{resource}").splitlines():
            kind, *fields = line.split()
            for field in fields:
                name, _sep, value = field.partition("=")
                if name.startswith("avg"):
                    found.setdefault(resource, {})[f"{kind}_{name}"] = float(value)
    return found


def meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo in kB."""
    found = {}
    for line in text.splitlines():
        name, _sep, value = line.partition(":")
        if value.split():
            found[name] = int(value.split()[0])
    return found


def unit_show(unit: str, timeout: float) -> dict[str, str]:
    _rc, out = run(["systemctl", "show", unit, *[f"--property={p}" for p in UNIT_PROPERTIES]], timeout)
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return {key: props.get(key, "") for key in UNIT_PROPERTIES}


def docker_json(argv: list[str], timeout: float) -> tuple[dict[str, Any], str]:
    """The first object a `docker ... inspect` prints, or {} and the error."""
    rc, out = run(["docker", *argv], timeout)
    try:
        return (json.loads(out)[0], "") if rc == 0 else ({}, out.strip()[:200])
    except (ValueError, IndexError):
        return {}, out.strip()[:200]


def image_report(image: str, timeout: float) -> dict[str, Any]:
    found, error = docker_json(["image", "inspect", image], timeout)
    if not found:
        return {"name": image, "present": False, "error": error}
    return {"name": image, "present": True, "id": found.get("Id", ""), "repo_digests": found.get("RepoDigests") or [],
            "architecture": found.get("Architecture", ""), "os": found.get("Os", ""), "created": found.get("Created", ""),
            "labels": (found.get("Config") or {}).get("Labels") or {}}


def container_state(name: str, timeout: float) -> dict[str, Any]:
    """The container a unit runs (named as its unit): its state, and whether the kernel killed it for memory."""
    found, _error = docker_json(["container", "inspect", name], timeout)
    state = found.get("State") or {}
    return {key: state.get(key) for key in ("Status", "ExitCode", "OOMKilled", "Error", "StartedAt", "FinishedAt")} \
        if found else {}


def vllm_version(image: dict[str, Any], running: list[str], timeout: float) -> str:
    """From the image's labels, else from a running serving container (`docker exec`, reading the package's
    metadata: no import of vLLM or torch, no new container). Never a `docker run`: starting the serving
    image claims unified memory on a node that may be short of it, which is why one runs a doctor."""
    labels = image.get("labels") or {}
    for label in VERSION_LABELS:
        if labels.get(label):
            return f"{labels[label]} (label {label})"
    for name in running:
        rc, out = run(["docker", "exec", name, "python3", "-c",
                       "import importlib.metadata as m; print(m.version('vllm'))"], timeout)
        if rc == 0 and out.strip():
            return f"{out.strip()} (container {name})"
    return "unknown (no version label, and no serving container runs)"


# ---- what looks wrong ------------------------------------------------------------

def fabric_interfaces(env: dict[str, str], nets: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The interfaces the units' env names for the fabric -> the key that names it: the socket
    interfaces, and the interfaces behind the RDMA devices of NCCL_IB_HCA."""
    named: dict[str, str] = {}
    for key in INTERFACE_KEYS:
        value = env.get(key, "")
        if value and not value.startswith("^"):
            for name in value.lstrip("=").split(","):
                if name.strip():
                    named.setdefault(name.strip().split(":")[0], key)
    hcas = {h.strip().split(":")[0] for h in env.get("NCCL_IB_HCA", "").lstrip("=").split(",")
            if h.strip() and not env.get("NCCL_IB_HCA", "").startswith("^")}
    for name, net in nets.items():
        if hcas & set(net["rdma"]):
            named.setdefault(name, "NCCL_IB_HCA")
    return named


def unit_findings(units: dict[str, dict[str, str]], expected: list[str]) -> list[str]:
    findings = []
    for unit, props in units.items():
        state, result = props.get("ActiveState", ""), props.get("Result", "")
        restarts = int(props.get("NRestarts") or 0)
        if props.get("LoadState") in ("", "not-found"):
            if unit in expected:
                findings.append(f"unit {unit} is not installed")
            continue
        if state in ("activating", "reloading") or props.get("SubState") == "auto-restart":
            findings.append(f"unit {unit} is restarting ({props.get('SubState') or state}, restarts {restarts})")
        elif state != "active" and (unit in expected or state == "failed"):
            findings.append(f"unit {unit} is {state or 'unknown'}{f' ({result})' if result not in ('', 'success') else ''}")
        elif restarts:
            findings.append(f"unit {unit} restarted {restarts} time(s) on its own since it was last started")
    return findings


def findings(report: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """What looks wrong on this node, one line each (the summary's)."""
    found = unit_findings(report["units"], settings.get("expected_units", []))
    for name, state in report["containers"].items():
        if state.get("OOMKilled"):
            found.append(f"container {name} was killed for memory (OOM)")
    nets, mtu = report["interfaces"], int(settings.get("mtu", 9000))
    for name, key in sorted(fabric_interfaces(report["fabric_env"], nets).items()):
        net = nets.get(name)
        if net is None:
            found.append(f"interface {name} ({key}) does not exist")
            continue
        if net["operstate"] not in ("up", "unknown"):
            found.append(f"link {name} ({key}) is {net['operstate'] or 'unknown'}")
        if report["rdma"] and net["mtu"] and int(net["mtu"]) != mtu:
            found.append(f"MTU of {name} ({key}) is {net['mtu']}, not {mtu}")
    pressure = report["psi"].get("memory", {}).get("some_avg60")
    if pressure is not None and pressure >= float(settings.get("memory_pressure", 10)):
        found.append(f"memory pressure is high: some avg60 {pressure:.1f}% (/proc/pressure/memory)")
    image = report["image"]
    if not image.get("present"):
        found.append(f"image {image['name']} is not on the node ({image.get('error', '')})")
    elif ARCHITECTURES.get(image["architecture"], image["architecture"]) != \
            ARCHITECTURES.get(report["machine"], report["machine"]):
        found.append(f"image {image['name']} is for {image['architecture']}, the node is {report['machine']}")
    return found


# ---- all of it ---------------------------------------------------------------------

def env_files(config_dir: str, secrets: set[str]) -> dict[str, str]:
    """The units' env files (the secret ones are never read out), redacted."""
    return {os.path.basename(path): redact_env(read(path), secrets)
            for path in sorted(glob.glob(os.path.join(config_dir, "*.env")))
            if not SECRET_FILE.search(os.path.basename(path)) and not path.endswith(".secrets.env")}


def collect(settings: dict[str, Any]) -> dict[str, Any]:
    timeout = float(settings.get("timeout", 20))
    config_dir = settings["config_dir"]
    secrets = secret_values([read(path) for path in sorted(glob.glob(os.path.join(config_dir, "*")))
                             if SECRET_FILE.search(os.path.basename(path)) and os.path.isfile(path)])
    envs = env_files(config_dir, secrets)
    fabric_env = {key: value for text in envs.values() for key, value in env_pairs(text).items()
                  if FABRIC_ENV.match(key)}
    units = {unit: unit_show(unit, timeout) for unit in settings["units"]}
    containers = {unit: container_state(unit, timeout) for unit in settings["units"]}
    nets = interfaces()
    image = image_report(settings["image"], timeout)
    uname = os.uname()
    report: dict[str, Any] = {
        "kernel": f"{uname.sysname} {uname.release} {uname.version}", "machine": uname.machine,
        "os": next((line.split("=", 1)[1].strip('"') for line in read("/etc/os-release").splitlines()
                    if line.startswith("PRETTY_NAME=")), ""),
        "uptime_s": float((read("/proc/uptime").split() or ["0"])[0]), "loadavg": read("/proc/loadavg").strip(),
        "nvidia": nvidia(timeout), "docker": run(["docker", "--version"], timeout)[1].strip(),
        "interfaces": nets, "firmware": firmware(nets, timeout), "rdma": rdma_devices(),
        "fabric_env": fabric_env, "units": units,
        "containers": {name: state for name, state in containers.items() if state},
        "memory_kb": {key: value for key, value in meminfo(read("/proc/meminfo")).items()
                      if key in ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapTotal", "SwapFree")},
        "psi": psi(), "image": image,
    }
    running = [name for name, state in containers.items() if state.get("Status") == "running"
               and name == settings.get("serve_unit")]
    report["vllm_version"] = vllm_version(image, running, timeout)
    texts = {f"env/{name}": text for name, text in envs.items()}
    lines = str(int(settings.get("journal_lines", 200)))
    for unit in settings["units"]:
        if units[unit]["LoadState"] not in ("", "not-found"):
            texts[f"journal/{unit}.txt"] = run(["journalctl", "-u", unit, "-n", lines, "-o", "short-iso",
                                                "--no-pager"], timeout)[1]
    texts["proc/meminfo.txt"] = read("/proc/meminfo")
    for resource in ("memory", "cpu", "io"):
        texts[f"proc/pressure-{resource}.txt"] = read(f"/proc/pressure/{resource}")
    texts["ip-addr.txt"] = run(["ip", "-d", "addr"], timeout)[1]
    texts["dmesg-tail.txt"] = "\n".join(run(["dmesg", "--ctime"], timeout)[1].splitlines()[-100:])
    report = redact_tree(report, secrets)
    return {"report": report, "texts": redact_tree(texts, secrets),
            "findings": redact_tree(findings(report, settings), secrets)}


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") if sys.argv[1] != "-" else sys.stdin as settings_file:
        settings = json.load(settings_file)
    print(json.dumps(collect(settings)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
