# Quick look: replay against closed-form peak memory, one pair of bars per run, from the runs.tsv
# that `lrcnn export FILE.h5 -o DIR` writes (results/SCHEMA.md, "Exported tables"). The points on
# the right axis are the closed form's difference from the replay in percent.
#
#     lrcnn export results/baselines.h5 -o /tmp/tsv
#     gnuplot -e "dir='/tmp/tsv'; out='/tmp/peaks.png'" plots/gnuplot/peaks.gp
#
# Columns are found by their header names, so added columns do not break it. The bars are in GiB
# when the largest peak is at least 1 GiB, else MiB. For paper figures use plots/*.py.

if (!exists("dir")) { print "peaks.gp: give the export directory: gnuplot -e \"dir='DIR'; out='OUT.png'\" peaks.gp"; exit status 2 }
if (!exists("out")) { out = dir . "/peaks.png" }
file = dir . "/runs.tsv"
if (system(sprintf("test -r '%s' && echo y", file)) ne "y") { print sprintf("peaks.gp: %s: no such file (run lrcnn export FILE.h5 -o %s)", file, dir); exit status 2 }

set datafile separator "\t"
set datafile columnheaders
stats file using (column("replay_peak_bytes")) nooutput
n = STATS_records
unit = STATS_max >= 2**30 ? 2.0**30 : 2.0**20
uname = STATS_max >= 2**30 ? "GiB" : "MiB"
stats file using (column("closed_peak_bytes")) nooutput
top = STATS_max / unit
stats file using (100.0 * (column("closed_peak_bytes") - column("replay_peak_bytes")) / column("replay_peak_bytes")) nooutput
elo = STATS_min < 0 ? STATS_min : 0
ehi = STATS_max > 0 ? STATS_max : 0
epad = (ehi - elo) > 0 ? 0.1 * (ehi - elo) : 1

set terminal pngcairo size (n * 22 + 260 > 900 ? n * 22 + 260 : 900), 560 font "sans,9"
set output out
set title sprintf("Peak memory per run: replay vs closed form (%s)", file) noenhanced
set ylabel sprintf("peak memory (%s)", uname)
set y2label "closed − replay (%)"
set ytics nomirror
set y2tics
set yrange [0:(top > 0 ? top : 1) * 1.08]
set y2range [elo - epad:ehi + epad]
set xrange [-0.7:n - 0.3]
set xtics rotate by 60 right font ",7" noenhanced
set grid ytics lc rgb "#dddddd"
set key outside right top vertical Left reverse samplen 2
set style fill solid 0.85 noborder
set boxwidth 0.38
label(i) = sprintf("%s %s b%d %s", strcol("run"), strcol("net"), int(column("batch")), strcol("plan"))

plot file using ($0 - 0.2):(column("replay_peak_bytes") / unit):xtic(label(0)) with boxes lc rgb "#D55E00" title "replay", \
     ''   using ($0 + 0.2):(column("closed_peak_bytes") / unit) with boxes lc rgb "#0072B2" title "closed form", \
     ''   using 0:(100.0 * (column("closed_peak_bytes") - column("replay_peak_bytes")) / column("replay_peak_bytes")) axes x1y2 \
          with points pt 7 ps 0.6 lc rgb "black" title "closed − replay (%)"
