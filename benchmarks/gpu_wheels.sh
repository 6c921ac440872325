#!/usr/bin/env bash
# The wheels benchmarks/gpu_check.py needs on the GPU machine (Python 3.12, torch 2.11 + CUDA 13,
# transformers 5.17, no registry access), fetched here into .whl/ (git-ignored):
#
#     bash benchmarks/gpu_wheels.sh            # ~6 MiB, a few seconds
#
# What the machine already has (torch, transformers, numpy, rich, tqdm, psutil, msgpack, ninja,
# einops, py-cpuinfo, nvidia-ml-py, typing-extensions) is not fetched. DeepSpeed publishes only an
# sdist, so its wheel is built here (pure Python: its CUDA ops are compiled just in time, and the
# DeepSpeed engine hands DeepSpeed torch's AdamW, so none is compiled). docs/scale-out.md says how
# the wheels travel.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.whl
rm -rf "$dest" && mkdir -p "$dest"
pip=(python3 -m pip)
[ -x .venv/bin/python ] && pip=(.venv/bin/python -m pip)
binary=(pydantic==2.14.4 typing-extensions==4.16.0 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
        rich-argparse==1.8.0 hjson==3.1.0)
"${pip[@]}" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$dest" "${binary[@]}"
# DeepSpeed: an sdist only; build a py3-none-any wheel without its ops.
DS_BUILD_OPS=0 "${pip[@]}" wheel -q --no-deps -w "$dest" deepspeed==0.19.8
ls -la "$dest"
du -sh "$dest"
