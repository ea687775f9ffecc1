#!/bin/bash
# model report then every forced algorithm, in one lab
D=$(dirname $(readlink -f $0)); $D/model.sh; $D/forced.sh
