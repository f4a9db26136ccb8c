# figspec.gp: the speculative gain (tokens/s per GPU with speculation over without) against
# the instance's concurrency, and against the mean emitted tokens per request and step, for
# DFlash2, DSpark, MTP and MTP under SGLang's adaptive steps. Input: data/figspec.tsv
# (figspec.sh): concurrency, mode, gain mean / min / max over the seeds, tokens per step.
name = "figspec"; w = 1000; h = 800
load "term.gp"
set datafile separator "\t"
set multiplot layout 2,1 title "Speculative gain over plain decoding: GLM-5.3, 8 x H200, 100K context, HiSparse hot buffer (mean and range of 3 seeds)"
set grid
set key top right
set logscale x 2
set xlabel "concurrency on the instance (requests; per GPU: / 8)"
set ylabel "gain (tokens/s per GPU, x)"
set yrange [0:*]
sel(m) = "< awk -F'\t' 'NR > 1 && $2 == \"" . m . "\"' data/figspec.tsv"
plot 1 with lines dt 2 lc rgb "gray40" notitle, \
     sel("dflash2") using 1:3:4:5 with yerrorlines lw 2 pt 7 title "DFlash2 (gamma 7)", \
     sel("dspark") using 1:3:4:5 with yerrorlines lw 2 pt 5 title "DSpark (gamma <= 8)", \
     sel("mtp") using 1:3:4:5 with yerrorlines lw 2 pt 9 title "MTP (3 steps, topk 1, 4 tokens)", \
     sel("mtp-adaptive") using 1:3:4:5 with yerrorlines lw 2 dt 3 pt 11 lc rgb "dark-red" title "MTP, SGLang adaptive steps"
unset logscale x
set xlabel "emitted tokens per request and step (accepted + 1)"
set xrange [0.9:*]
plot 1 with lines dt 2 lc rgb "gray40" notitle, \
     sel("dflash2") using 6:3:4:5 with yerrorbars pt 7 title "DFlash2", \
     sel("dspark") using 6:3:4:5 with yerrorbars pt 5 title "DSpark", \
     sel("mtp") using 6:3:4:5 with yerrorbars pt 9 title "MTP", \
     sel("mtp-adaptive") using 6:3:4:5 with yerrorbars pt 11 lc rgb "dark-red" title "MTP adaptive"
unset multiplot
