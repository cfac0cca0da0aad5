"""Reads a folder of TensorBoard event files with TensorBoard's own reader (EventAccumulator, as
`tensorboard --logdir` with --load_fast=false does, purging superseded points) and prints what it
holds as one JSON object: {"scalars": {tag: [[step, value], ...]}, "texts": {tag: [[step, text],
...]}}. The record checksums are verified as the files are read.

    PYTHONPATH=$(launch/tensorboard.sh) python3 tests/e2e/tensorboard_read.py FOLDER
"""
import json
import sys

from tensorboard.backend.event_processing import event_accumulator


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tensorboard_read.py FOLDER")
    accumulator = event_accumulator.EventAccumulator(
        sys.argv[1], size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    scalars = {tag: [[e.step, e.value] for e in accumulator.Scalars(tag)]
               for tag in tags["scalars"]}
    texts = {tag: [[e.step, e.tensor_proto.string_val[0].decode("utf-8")]
                   for e in accumulator.Tensors(tag)]
             for tag in tags["tensors"]}
    print(json.dumps({"scalars": scalars, "texts": texts}))


if __name__ == "__main__":
    main()
