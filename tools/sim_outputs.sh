#!/usr/bin/env bash
# What `lrcnn sim` prints over a fixed set of configurations, one file each, so that a change that
# must not alter behaviour (a move of files, a split of functions) can be checked byte for byte:
#   tools/sim_outputs.sh BINARY DIR     then     diff -r DIR_BEFORE DIR_AFTER
# The set: 10 nets (the shipped full-size ones, the small test nets) x BatchNorm modes (where the net
# has BN: train, frozen, per-band) x 3 encodings (none, +gist, +dpr:fp16) x 11 plans (every preset
# kind and band counts), each a table row with replay, closed form, FLOPs and time; 1,000 and more
# configurations, one file each. Each command is the first line of its file. Also one full breakdown a net, the
# LR-CNN authors' configurations on VGG-16 and ResNet-50, and the
# planner's answer at two budgets.
set -euo pipefail
bin=$1 out=$2
mkdir -p "$out"
plans="layer,ckpt-sqrt,vdnn-all,vdnn-conv,2ps:2,2ps:4,overl:3,overl:6,2ps-h,overl-h,torch2"
run() { # FILE ARGS...: the command and what it prints (errors too)
  local f=$1; shift
  { echo "\$ lrcnn $*"; "$bin" "$@" 2>&1 || echo "exit $?"; } | sed -E 's/(searched +[0-9]+ plans) in [0-9.]+ s/\1/' >"$out/$f" # the planner's own time varies
}
for net in vgg16 resnet50 mobilenetv2 densenet121 unet convnext-tiny kernels vgg-small resnet-small unet-small; do
  bns="auto"
  grep -q "^bn " "$(dirname "$0")/../nets/$net.net" && bns="train frozen per-band"
  for bn in $bns; do
    for enc in "" +gist +dpr:fp16; do # one call a plan: a plan the net refuses says so in its own file
      for p in ${plans//,/ }; do
        [ "$p" = torch2 ] && [ -n "$enc" ] && continue
        run "$net-$bn-$p${enc}.txt" sim --net "$net" --batch 8 --bn "$bn" --plan "$p$enc" --device h100
      done
    done
  done
  run "$net-breakdown.txt" sim --net "$net" --batch 4 --plan 2ps:4
done
run authors-vgg16.txt sim --net vgg16 --plan authors-2ps,authors-overl,authors-2ps-h,authors-overl-h
run authors-resnet50.txt sim --net resnet50 --plan authors-2ps,authors-2ps-h --bn per-band
run plan-vgg16.txt plan --budget 1.8GiB --net vgg16 --image 224 --optimizer sgd
run plan-resnet50.txt plan --budget 600MiB --net resnet50 --batch 8
echo "$(ls "$out" | wc -l) files in $out"
