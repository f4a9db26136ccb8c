# Result 4 of the paper: a load step. Optional residency cuts host fetches at low load and is
# released when the load rises. Inputs (written by make-figs.sh):
#   data/loadstep-fetch.tsv   blocks: adaptive, hisparse; columns t_s, fetch % (10-step window)
#   data/loadstep-hbm.tsv     Adaptive's GPU: t_s, cumulative GB of weights+workspace, +indexer,
#                             +protected, +optional
#   data/loadstep-active.tsv  blocks: adaptive, hisparse; columns t_s, requests running on the GPU
#   data/loadstep-marks.tsv   the step times and the paper's figures (from models/paper-results.ini)
name = "fig4-loadstep"; w = 1000; h = 1000
load "term.gp"
set datafile separator "\t"
mark(k) = real(system("awk -F'\\t' '$1==\"" . k . "\"{print $2}' data/loadstep-marks.tsv"))
levels = system("awk -F'\\t' '$1==\"levels\"{print $2}' data/loadstep-marks.tsv")
set multiplot layout 3,1 title "Load steps: GLM-5.3, 100K context, instance concurrency " . levels . " (one decode GPU of 8; " . sprintf("%g", mark("end_s")) . " simulated s)"
set grid
# The same margins in every panel, so that their time axes line up.
set lmargin 10
set rmargin 3
set key top right
set xlabel "simulated time (s)"
set xrange [0:mark("end_s")]
set ylabel "host fetches (% of selected rows)"
set yrange [0:*]
set arrow 1 from mark("step1_s"), graph 0 to mark("step1_s"), graph 1 nohead dt 2 lc rgb "gray40"
set arrow 2 from mark("step2_s"), graph 0 to mark("step2_s"), graph 1 nohead dt 2 lc rgb "gray40"
plot "data/loadstep-fetch.tsv" index 0 using 1:2 with lines lw 2 title "Adaptive", \
     "" index 1 using 1:2 with lines lw 2 title "HiSparse (fixed budget)", \
     mark("paper_hisparse_pct") with lines dt 3 lc rgb "black" title "paper: HiSparse budget", \
     mark("paper_adaptive_pct") with lines dt 4 lc rgb "dark-green" title "paper: Adaptive at low load"
set ylabel "requests running on the GPU"
set key top left
plot "data/loadstep-active.tsv" index 0 using 1:2 with steps lw 2 title "Adaptive", \
     "" index 1 using 1:2 with steps lw 2 title "HiSparse (fixed budget)"
set ylabel "HBM of Adaptive's GPU (GB)"
set key top left opaque box
plot "data/loadstep-hbm.tsv" using 1:5:4 with filledcurves lc rgb "#66c2a5" title "optional rows", \
     "" using 1:4:3 with filledcurves lc rgb "#fc8d62" title "protected rows", \
     "" using 1:3:2 with filledcurves lc rgb "#8da0cb" title "indexer keys", \
     "" using 1:2 with filledcurves x1 lc rgb "#bbbbbb" title "weights + workspace"
unset multiplot
