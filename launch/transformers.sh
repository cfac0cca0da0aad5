#!/usr/bin/env bash
# Installs Hugging Face transformers with SentencePiece (the one place their versions are pinned)
# into a private folder, for the import tests (tests/e2e/marian_reference.py and
# m2m100_reference.py build, save and run a MarianMTModel and M2M-100 / NLLB-200 models with it,
# lora_reference.py fine-tunes one with peft's LoRA;
# protobuf is what transformers reads a SentencePiece model with to make NllbTokenizer), and prints what to put on PYTHONPATH: that folder and
# the PyTorch of launch/torch-wheel.sh, which transformers runs on (its CUDA libraries come from
# /usr/local/cuda/lib64: put that on LD_LIBRARY_PATH).
#
#   launch/transformers.sh [PREFIX]          (default: .deps/transformers-<version>)
#
# pip install --target --no-deps with every dependency pinned, for the interpreter that $PYTHON
# names (python3 by default). A folder that already holds this version is left as it is.
set -euo pipefail
readonly TRANSFORMERS_VERSION=5.24.0 PROTOBUF_VERSION=6.33.6
readonly REQUIREMENTS=(
  "transformers==$TRANSFORMERS_VERSION" sentencepiece==0.2.1 tokenizers==0.23.3
  safetensors==0.8.0 huggingface_hub==2.4.0 hf_xet==1.8.0 numpy==2.4.6 packaging==26.4
  pyyaml==6.0.4 regex==2026.11.19 tqdm==4.70.1 filelock==4.3.1 fsspec==2026.9.0
  typing_extensions==4.16.0 typer==0.29.2 click==8.5.1 rich==15.0.0 shellingham==1.5.4
  markdown_it_py==4.3.0 mdurl==0.1.2 pygments==2.21.0 annotated_doc==0.0.7 httpx2==2.16.2
  httpcore2==2.16.2 h11==0.16.0 anyio==4.16.0 idna==3.20 truststore==0.10.5 pydantic==2.14.4
  pydantic_core==2.50.5 annotated_types==0.8.0 typing_inspection==0.4.5 "protobuf==$PROTOBUF_VERSION"
  # torch's own Python dependencies (launch/torch-wheel.sh installs torch without them)
  sympy==1.14.0 mpmath==1.3.0 networkx==3.5 jinja2==3.1.6 markupsafe==3.0.3
  # Hugging Face peft, the LoRA test's yardstick (tests/e2e/lora_reference.py), and what it imports
  peft==0.21.2 accelerate==1.16.0 psutil==7.2.2)
cd "$(dirname "$0")/.."
prefix=${1:-.deps/transformers-$TRANSFORMERS_VERSION}

torch=$(launch/torch-wheel.sh)
# The marker is the last requirement added, so that a folder installed before it is redone.
launch/pip-target.sh transformers "$prefix" "peft-0.21.2.dist-info" \
  "${REQUIREMENTS[@]}"
echo "$(cd "$prefix" && pwd):$(dirname "$torch")"
