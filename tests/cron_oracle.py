#!/usr/bin/env python3
"""cron_oracle.py -- the next fire times of cron expressions by croniter,
for test_cron_expr's comparison with host/cron/expr.c.

Reads lines "EXPR<TAB>START" (EXPR in croniter's Unix syntax, START Unix
seconds, UTC) and writes for each one line: the next five fires as Unix
seconds separated by blanks, then "NEVER" if croniter finds no more within
50 years, or "ERROR <message>" when croniter refuses the expression."""
import sys
from datetime import datetime, timezone

from croniter import croniter, CroniterBadDateError


def main():
    out = []
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line:
            continue
        expr, start = line.split("\t")
        at = datetime.fromtimestamp(int(start), timezone.utc)
        fires = []
        try:
            it = croniter(expr, at, max_years_between_matches=50)
            for _ in range(5):
                fires.append(str(int(it.get_next(float))))
        except CroniterBadDateError:
            fires.append("NEVER")
        except Exception as exc:  # a refusal: the test reports it
            fires = ["ERROR " + str(exc).replace("\n", " ")]
        out.append(" ".join(fires))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
