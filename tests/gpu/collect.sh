#!/bin/bash
# Part 2: wait for the recorder started by run_on_device.sh, then bring back its files.
pid=$(cat /tmp/rec/pid)
while kill -0 "$pid" 2>/dev/null; do sleep 5; done
cp /tmp/rec/run.log /tmp/rec/out/* "$OUT/"
tail -60 /tmp/rec/run.log
