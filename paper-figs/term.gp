# term.gp: the output of a figure script, PNG or PDF. A figure script sets `name` (the file
# name without extension) and `w`, `h` (pixels of the PNG) and loads this file; make-figs.sh
# runs each script twice, with -e "fmt='png'" and -e "fmt='pdf'" (the PDF at 100 pixels per inch).
if (!exists("fmt")) fmt = "png"
if (fmt eq "pdf") { set terminal pdfcairo size (w / 100.0), (h / 100.0) font ",9" } else { set terminal pngcairo size w, h font ",11" }
set output name . "." . fmt
