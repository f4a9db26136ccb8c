# tests/gpu_tool.sh: sourced by the command-line tests of the CUDA tools (cli_dhbench.sh,
# cli_dhreplay.sh), which run where nvcc exists and no GPU does. The caller sets bin (the tool)
# and tmp (a scratch folder); BAD_OUT, when set, is an output folder passed as --out.
#
# gpu_tool_present: true when $bin is built; otherwise prints the one result this machine can
# give (PASS without nvcc, FAIL when nvcc exists and the tool was not built) and is false.
gpu_tool_present() {
  [ -x "$bin" ] && return 0
  name=$(basename "$bin")
  if [ "$(make -s --no-print-directory print-BUILD_CUDA)" = 1 ]; then echo "FAIL ${name}_built (nvcc exists)"; else echo "PASS ${name}_not_built_without_nvcc"; fi
  return 1
}
# bad NAME WANT ARGS...: $bin ARGS exits 2 with exactly one stderr line containing WANT (and,
# with BAD_OUT, writes nothing there).
bad() {
  name=$1; want=$2; shift 2
  if [ -n "$BAD_OUT" ]; then "$bin" "$@" --out "$BAD_OUT" >/dev/null 2>"$tmp/err"; else "$bin" "$@" >/dev/null 2>"$tmp/err"; fi
  rc=$?
  if [ "$rc" -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err" &&
     { [ -z "$BAD_OUT" ] || [ -z "$(ls "$BAD_OUT" 2>/dev/null)" ]; }; then
    echo "PASS $name"
  else
    echo "FAIL $name (status $rc: $(head -c 200 "$tmp/err"))"
  fi
}
