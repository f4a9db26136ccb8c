#!/bin/sh
# The H200 calibration (analysis/calibrate.h, bin/dhcal calibrate; the profile's header names this
# command): sh analysis/calibrate.sh [OUT.ini [BENCH_DIR [REPLAY.csv [BASE.ini]]]]
exec bin/dhcal calibrate "$@"
