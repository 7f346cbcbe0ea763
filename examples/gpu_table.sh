#!/usr/bin/env bash
# The GPU table (issue 53): every family and the strongest baselines at the size users fine-tune (768 wide,
# 12 layers, 12 heads), batch 4, bfloat16, through `hf-longdoc bench`, in three stages (each prints its rows as it
# measures them, so a stage cut short by its time limit still shows what it measured):
#   1. forward passes at 8,192 tokens, each model's forward also beside its own matrix products alone;
#   2. training steps (forward + backward) at 8,192;
#   3. forward passes at LONG_LENGTHS (default 2,048, 16,384 and 32,768; OOM rows where a model does not fit).
# Compilation (FlexAttention, the S-LSTM's step, ModernBERT's flex_attention) happens in the warm-up pass and is
# reported apart ("compile s"). The sparse Longformer runs both its GPU backends, `flex` and `blocked`, by name.
# Attention dropout is 0 for every Transformer, as `hf-longdoc train` sets it for the sparse Longformer (FlexAttention
# has no dropout) and as ModernBERT's config has it.
#
#   bash examples/gpu_table.sh [OUTPUT_PREFIX]
#
# On an H200 the defaults (every model in every stage, three long lengths) take about 4.9 minutes by the stage times
# of docs/results.md ("third session": 67 s forward, 63 s training, 73 s at 2,048 and 16,384, about 90 s at 32,768),
# about 115 s of it ModernBERT compiling for each shape.
#
# Environment: HF_LONGDOC (the command; default hf-longdoc, or `python -m hf_longdoc` with src/ on PYTHONPATH),
# MODELS (stage 1), TRAIN_MODELS (stage 2), LONG_MODELS (stage 3; each defaults to MODELS), LENGTH (stages 1-2),
# LONG_LENGTHS (stage 3), SIZE (the size flags), STAGE_TIMEOUT (seconds a stage may take, default 300).
set -uo pipefail
prefix=${1:-out/gpu}
cli=${HF_LONGDOC:-hf-longdoc}
models=${MODELS:-contextualizer,segment_lm:att,sparse_longformer:flex,sparse_longformer:blocked,slstm,elementwise,bert,modernbert,longformer}
train_models=${TRAIN_MODELS:-$models}
long_models=${LONG_MODELS:-$models}
length=${LENGTH:-8192}
long_lengths=${LONG_LENGTHS:-2048,16384,32768}
size=${SIZE:---hidden-size 768 --num-layers 12 --num-heads 12 --batch-size 4 --dtype bfloat16 --device cuda}
limit=${STAGE_TIMEOUT:-300}
common="$size --attention-dropout 0 --repeats 3 --warmup 1 --no-micro-benchmarks --overwrite"
mkdir -p "$(dirname "$prefix")"
status=0

stage() {  # stage NAME MODELS FLAGS...: one bench run under the time limit
    local name=$1 chosen=$2
    shift 2
    echo "== $name"
    local start=$SECONDS
    timeout "$limit" $cli bench --models "$chosen" $common "$@" --output "${prefix}_$name" \
        || { echo "stage $name failed or ran past ${limit} s (exit $?)"; status=1; }
    echo "== $name took $((SECONDS - start)) s"
}

stage forward "$models" --lengths "$length" --roofline-length "$length"
stage training "$train_models" --lengths "$length" --backward
stage lengths "$long_models" --lengths "$long_lengths" --no-roofline
exit $status
