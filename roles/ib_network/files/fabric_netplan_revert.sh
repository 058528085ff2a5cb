#!/bin/sh
# Puts back the netplan file a fabric change replaced, and applies it. Armed on
# a timer on the node before the change is applied (tasks/netplan.yml); the
# run stops the timer once every node reached every other over the new fabric,
# so this runs only when the run could not confirm in time, even when the
# change cut the node off from the controller.
#   $1: the netplan file the role writes
#   $2: where its previous content was saved (absent: there was no file)
set -eu
file=$1
previous=$2
if [ -f "$previous" ]; then
  cp -p "$previous" "$file"
  echo "dgx-spark-vllm fabric: the change was not confirmed in time; put back the previous $file"
else
  rm -f "$file"
  echo "dgx-spark-vllm fabric: the change was not confirmed in time; removed $file (there was none before)"
fi
netplan apply
rm -f "$previous"
echo "dgx-spark-vllm fabric: reverted"
