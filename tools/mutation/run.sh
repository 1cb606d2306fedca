#!/usr/bin/env bash
# `make mutation`: mutmut over the core modules listed in pyproject.toml ([tool.mutmut]).
#
# mutmut puts its mutated copy first on sys.path only for a src/ layout, and an editable
# install would win over it anyway (its import hook runs before sys.path). So the run works
# in a copy of the repository, .mutation/, with the package at src/knowledge, and with its
# own venv, .venv-mutation, that has the dependencies but not the package itself.
#   tools/mutation/run.sh                  every module in [tool.mutmut] only_mutate
#   tools/mutation/run.sh "knowledge.core.scope*"   mutmut's own mutant-name filter; the figures
#                                              are merged with the other modules' last run
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
venv=$root/.venv-mutation
stamp=$venv/.installed
python=${PYTHON:-python3}
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
    [[ -x $venv/bin/python ]] || "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet '.[dev]' 'mutmut>=3.8,<4'
    "$venv/bin/python" -m pip uninstall --quiet --yes knowledge-search
    touch "$stamp"
fi
work=$root/.mutation
rm -rf "$work"
mkdir -p "$work/src"
cp -r layers/knowledge/knowledge "$work/src/knowledge"
cp -r tests bench events examples functions docs layers tools template.yaml pyproject.toml "$work/"
# mutmut leaves decorated functions alone. text.py's two @lru_cache functions are pure (the
# cache only saves time), so the copy drops the decorator and they are mutated too; it also
# keeps a run's mutant from answering with results the unmutated code cached before the fork.
sed -i '/^@lru_cache(/d' "$work/src/knowledge/ranking/analysis.py"
cd "$work"
"$venv/bin/mutmut" run "$@" || true   # survivors are the result, not a failure
"$venv/bin/mutmut" results --all true > "$work/results.txt" || true
# A filtered run is merged into the figures of the modules it did not check (summary.py).
"$venv/bin/python" "$root/tools/mutation/summary.py" "$work/results.txt" \
    "$root/bench/results/mutation-results.txt" "$root/bench/results/mutation.json" "$@"
