#!/bin/sh
# tests/cli_docs.sh: the documents stay true to the repository.
# - The README's results tables equal what paper-figs/results.py generates from paper-figs/data/
#   (a planted change of one figure is caught).
# - Every repository path that a document, config or source comment cites exists (paths under
#   the project's top-level folders; patterns with *, NAME-style placeholders and the folders
#   that tools create, such as measurements/local/, are not paths to check).
# - No project file cites a document outside the repository.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1${2:+: $2}"; }

if python3 paper-figs/results.py --check README.md 2> "$T/err"; then ok docs_results_in_sync; else bad docs_results_in_sync "$(cat "$T/err")"; fi
sed 's/| simulated | \([0-9]\)/| simulated | 9\1/' README.md > "$T/README.md"
if ! python3 paper-figs/results.py --check "$T/README.md" 2> /dev/null; then ok docs_results_planted_caught; else bad docs_results_planted_caught; fi

# Tests are left out of the scan: they name missing files on purpose; so is the record of the
# restructuring, whose "before" column names the tree before the move (git show 925c8a8:PATH).
git ls-files | grep -E '\.(md|ini|suite|c|h|cu|cuh|sh|py|gp)$|^Makefile$' | grep -v '^tests/' |
  grep -v '^bench/RESULTS-restructure.md$' > "$T/files"
# Paths as cited: a top-level folder, then path characters; trailing punctuation dropped.
xargs grep -ohE '(^|[^A-Za-z0-9_./-])(common|traces|sim|models|kernels|analysis|paper-figs|bench|tests|docs|measurements)/[A-Za-z0-9_./*-]*[A-Za-z0-9_/*-]' < "$T/files" |
  sed -E 's/^[^a-z]//' | sort -u > "$T/cited"
missing=""
while read -r p; do
  # Patterns, placeholders, build outputs, the outputs of commands a document tells the user
  # to run (measurements/local/, the 8-GPU all-to-all not measured yet).
  case "$p" in *'*'*|*NAME*|*local*|*KERNEL*|*MODEL*|*TSV|*CSV|*DIR*|*.o|measurements/h200x8/?*) continue ;; esac
  # A prefix of existing files (tests/cli_, --timeline paper-figs/data/loadstep) counts.
  [ -e "$p" ] || ls -d "$p"* > /dev/null 2>&1 || missing="$missing $p"
done < "$T/cited"
if [ -z "$missing" ]; then ok docs_cited_paths_exist; else bad docs_cited_paths_exist "$missing"; fi

if xargs grep -lE '\.\./shared|METHOD\.md|H200\.md' < "$T/files" > "$T/outside"; then
  bad docs_no_outside_citations "$(tr '\n' ' ' < "$T/outside")"; else ok docs_no_outside_citations; fi
