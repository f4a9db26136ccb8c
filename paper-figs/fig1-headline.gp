# Result 1 of the paper: output tokens/s per decode GPU, GLM-5.3, 100K context,
# concurrency 128 (8 x H200). Inputs written by make-figs.sh. Error bars: the 95 %
# confidence interval of each column (batch means over the measured steps, dhsim --json
# "ci95_half"; data/headline.tsv column 3).
name = "fig1-headline"; w = 1200; h = 600
load "term.gp"
set datafile separator "\t"
mark(k) = real(system("awk -F'\\t' '$1==\"" . k . "\"{print $2}' data/headline-marks.tsv"))
set title sprintf("GLM-5.3, 100K context, concurrency 128 on 8 x H200: output per decode GPU (simulated; %d measured steps after a %d-step warm-up)", \
    mark("measured_steps"), mark("warmup_steps"))
set style data histograms
set style histogram errorbars gap 1 lw 1.5
set style fill solid 0.8 border -1
set boxwidth 0.7
set ylabel "output tokens/s per decode GPU"
set yrange [0:*]
set grid ytics
set xtics rotate by -20
set key top left box opaque
set xrange [-0.6:10.6]
set offsets 0,0,graph 0.25,0
plot "data/headline.tsv" using 2:3:xtic(1) skip 1 title "simulated (95 % confidence interval)" lc rgb "#4477aa", \
     "" using 0:($2+$3):(sprintf("%.0f", $2)) skip 1 with labels offset 0,0.7 notitle, \
     mark("paper_tok") with lines dt 2 lw 2 lc rgb "black" title "paper: Adaptive + DFlash2 (793)", \
     mark("paper_vs_hisparse_tok") with lines dt 3 lw 2 lc rgb "#cc6677" title "paper ratio 1.45x applied to simulated HiSparse", \
     mark("paper_vs_adaptive_tok") with lines dt 4 lw 2 lc rgb "#228833" title "paper ratio 1.27x applied to simulated Adaptive"
