#!/bin/bash
# what produced this folder: tools/wave1-tree.sh on /work/main
bash /work/main/tools/wave1-tree.sh /work/main "$(realpath "$(dirname "$0")")"
