"""Time the segment LM's head stage on cached features shaped like `hf-longdoc demo`'s (200 training and 40 validation
documents of 40 segment vectors of 384: MiniLM over 1,200 tokens in segments of 32), on one CPU thread (what
`fit_head` does) and on every thread, idle or beside busy processes.

    python examples/head_stage_threads.py --epochs 12 --busy 0
    python examples/head_stage_threads.py --epochs 12 --busy 1   # one process spinning on a core beside the run

The busy process is `python -c "while True: pass"`, started and stopped by this script.
"""

import argparse
import subprocess
import sys
import time

import torch
from transformers import BertConfig

from hf_longdoc import SegmentLMConfig, SegmentLMForSequenceClassification
from hf_longdoc.modeling import get_family
from hf_longdoc.training.head_fitting import _fit_head, fit_head


def demo_shaped(documents, generator):
    """(features, labels) like the demo's cache: z (n, 40, 384) with the last 3 segments absent, and labels."""
    z = torch.randn(documents, 40, 384, generator=generator)
    present = torch.ones(documents, 40, dtype=torch.bool)
    present[:, 37:] = False
    return [z, present], torch.randint(0, 2, (documents,), generator=generator)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--busy", type=int, default=0, help="processes spinning beside the run")
    args = parser.parse_args()
    backbone = BertConfig(vocab_size=100, hidden_size=384, num_hidden_layers=1, num_attention_heads=12,
                          intermediate_size=64, max_position_embeddings=32)
    config = SegmentLMConfig(backbone_config=backbone.to_dict(), num_segments=40, segment_length=32, variant="att",
                             num_labels=2, cls_token_id=1, sep_token_id=2, pad_token_id=0)
    family = get_family("segment_lm")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        for name, fit in (("one thread (fit_head)", fit_head), (f"{torch.get_num_threads()} threads", _fit_head)):
            torch.manual_seed(0)
            model = SegmentLMForSequenceClassification(config)
            generator = torch.Generator().manual_seed(0)
            train, validation = demo_shaped(200, generator), demo_shaped(40, generator)
            head = [n for n, _ in model.named_parameters() if not n.startswith("segment_lm.backbone")]
            start = time.perf_counter()
            fit(model, family, head, train, validation, args.epochs, 1e-3, 8, 42, False, 0.3, args.epochs, None)
            print(f"{name:>24}: {time.perf_counter() - start:6.1f} s for {args.epochs} epochs, {args.busy} busy "
                  "process(es) beside")
    finally:
        for process in busy:
            process.kill()


if __name__ == "__main__":
    main()
