#!/bin/bash
# what produced this folder (run from the tree timed, /work/main): tools/band.sh; table: tools/band_table.py
cd /work/main && bash tools/band.sh "$(realpath "$(dirname "$0")")"
