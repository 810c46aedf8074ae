#!/usr/bin/env bash
# Run HERE (where pip reaches a registry), before bench/first_gpu.sh on a GPU box that reaches
# nothing: what that box lacks, ready to carry.
#
#   bash bench/first_gpu_prepare.sh [SHARED_DATA_DIR]     (default: ../shared/data)
#
# .whl/: wheels for Python 3.12 on x86-64 Linux of every dependency the GPU image has not got
# (its list: Textual, pydantic, platformdirs, the test extras), at the versions installed here.
# .first-gpu-data/: MNIST's four raw files, gzipped (about 11 MB): the box has no ../shared.
# Both are git-ignored; name them in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pure-Python or manylinux wheels; the image already has torch, torchvision, numpy, PyYAML,
# nvidia-ml-py, pytest, pytest-xdist, hypothesis, jinja2 and mdurl.
packages=(textual rich markdown-it-py mdit-py-plugins linkify-it-py uc-micro-py pydantic pydantic_core
          annotated-types typing-inspection typing_extensions platformdirs pytest-asyncio jsonschema
          jsonschema-specifications referencing rpds-py attrs syrupy pytest-textual-snapshot)
pins=()
for name in "${packages[@]}"; do
    version=$(python3 -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p' || true)
    pins+=("$name${version:+==$version}")
done
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "${pins[@]}"
echo "wheels: $(ls .whl | wc -l) in .whl ($(du -sh .whl | cut -f1))"

data="${1:-../shared/data}"
raw="$data/MNIST/raw"
if [ -d "$raw" ]; then
    rm -rf .first-gpu-data && mkdir -p .first-gpu-data/MNIST/raw
    for f in "$raw"/*-ubyte; do gzip -c "$f" > ".first-gpu-data/MNIST/raw/$(basename "$f").gz"; done
    echo "MNIST: $(ls .first-gpu-data/MNIST/raw | wc -l) files in .first-gpu-data ($(du -sh .first-gpu-data | cut -f1))"
else
    echo "no MNIST at $raw: the GPU box's runs will use the offline digits, and say so"
fi
echo 'carry: [".whl", ".first-gpu-data"]; command: bash bench/first_gpu.sh'
