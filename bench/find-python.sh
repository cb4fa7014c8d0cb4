# Sourced by the bench runners: sets `python` to the first python3 that has matplotlib (a pyenv
# shim may shadow the system one that has it), or exits with how to install it.
python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import matplotlib' 2>/dev/null; then python=$candidate; break; fi
done
if [[ -z $python ]]; then
  echo "$(basename "$0"): no python3 with matplotlib, no plots: apt-get install python3-matplotlib" >&2
  exit 1
fi
