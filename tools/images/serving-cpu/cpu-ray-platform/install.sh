#!/bin/sh
# Install the platform plugin into the image's venv, offline and without a
# build backend: the package folder plus a dist-info entry whose
# entry_points.txt registers it in vllm.platform_plugins (what pip would write
# for a project declaring that entry point).
set -eu
py=$1
src=$(dirname "$0")
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp -r "$src/dgx_spark_cpu_ray" "$site/"
dist="$site/dgx_spark_cpu_ray-1.0.dist-info"
mkdir -p "$dist"
printf 'Metadata-Version: 2.1\nName: dgx-spark-cpu-ray\nVersion: 1.0\nSummary: test-image stand-in: the vLLM CPU platform under the Ray executor\n' > "$dist/METADATA"
printf '[vllm.platform_plugins]\ncpu_ray = dgx_spark_cpu_ray:register\n' > "$dist/entry_points.txt"
: > "$dist/RECORD"
"$py" -c 'import importlib.metadata as m; eps = m.entry_points(group="vllm.platform_plugins"); assert [e.name for e in eps] == ["cpu_ray"], eps'
