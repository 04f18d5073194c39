"""Write the budget-schedule corpus for the cron parity check (deterministic).

Usage: python scripts/cron_parity/corpus.py > tests/apis/data/cron_corpus.json
Then run the Go program in this directory on it (see main.go) for the golden file.
"""

from __future__ import annotations

import json
import random

HAND = [
    "", " ", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
    "@hourly", "@reboot", "@hourlyX", " @daily ", "@DAILY", "@every 5m", "@every 90m",
    "@every 1.5s", "@every 500ms", "@every -5m", "@every 0s", "@every", "@every 5 m",
    "* * * * *", "0 9 * * mon-fri", "0 9 * * MON-FRI", "0 0 1 jan *", "0 0 1 JAN-mar *",
    "*/15 * * * *", "*/0 * * * *", "*/60 * * * *", "*/59 * * * *", "5/15 * * * *",
    "5-10/2 * * * *", "10-5 * * * *", "1-2-3 * * * *", "1/2/3 * * * *", "*-5 * * * *",
    "*-x-y * * * *", "?-5 * * * *", "? ? ? ? ?", "0 0 * * 7", "0 0 * * 0", "0 0 * * 6",
    "0 0 0 * *", "0 0 32 * *", "0 0 31 * *", "0 0 30 2 *", "0 0 29 2 *", "0 0 31 4 *",
    "0 0 1,15 * 5", "0 0 1,15 * *", "0 0 * * 5", "0 0 */2 * 5", "0 0 1 * */2",
    "0 0 1 * */1", "0 0 */1 * 1", "60 * * * *", "61 * * * *", "* 24 * * *", "* 23 * * *",
    "* * * 0 *", "* * * 13 *", "* * * 12 *", "-1 * * * *", "-0 * * * *", "+5 * * * *",
    "007 * * * *", "1_0 * * * *", "\u0661 * * * *", "\uff15 * * * *", "1,,2 * * * *",
    ", * * * *", ",,, * * * *", "1, * * * *", "* * * * * *", "* * * *", "0 0 * * * 2026",
    "TZ=UTC * * * * *", "CRON_TZ=UTC * * * * *", "TZ=America/New_York 0 9 * * *",
    "0\t9\t*\t*\t*", "0\n9 * * *", "0\v9 * * *", "0\f9 * * *", "0\r9 * * *",
    "0\u00a09 * * *", "0\u20039 * * *", "0\u30009 * * *", "0\x1c9 * * *", "0\u180e9 * * *",
    "0  9  *  *  *", " 0 9 * * * ", "0 0 * * FRI", "0 0 * * fri", "0 0 * * Fri",
    "0 0 * * FR\u0130", "0 0 * * friday", "0 0 * * sun-sat", "0 0 * * sat-sun",
    "0 0 * jan-dec sun", "0 0 * dec-jan *", "0 0 L * *", "0 0 15W * *", "0 0 * * 5#3",
    "0 0 * * 5L", "H * * * *", "0 0 1 * mon", "30 2 * feb,apr 1-5",
    "9223372036854775807 * * * *", "9223372036854775808 * * * *", "*/9223372036854775807 * * * *",
    "0-59 0-23 1-31 1-12 0-6", "0-60 * * * *", "*/2,1-3 */5 * * *", "a * * * *",
    "* * * * mon,wed-fri", "1-1 * * * *", "59-59 * * * *",
]
FIELD_PARTS = ["*", "?", "0", "1", "5", "7", "12", "13", "23", "24", "29", "30", "31",
               "32", "59", "60", "*/2", "*/7", "*/0", "1-5", "5-1", "3/4", "1-10/3",
               "mon", "fri", "jan", "dec", "sun-sat", "", "-1", "1,2", "x"]


def random_schedule(rng: random.Random) -> str:
    fields = []
    for _ in range(rng.choice([4, 5, 5, 5, 5, 6])):
        parts = [rng.choice(FIELD_PARTS) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        fields.append(",".join(parts) or "*")
    return rng.choice([" ", " ", "\t", "  "]).join(fields)


VALID = [  # per field: values robfig accepts, to exercise the next activations
    ["*", "0", "5", "30", "59", "*/5", "*/7", "10-20", "0-59/15", "5/20", "1,31,59"],
    ["*", "0", "9", "23", "*/3", "8-17", "0-23/6", "22/1", "1,13"],
    ["*", "?", "1", "15", "29", "30", "31", "*/2", "1-7", "10-20/5", "1,15"],
    ["*", "1", "2", "12", "feb", "Jan-Jun", "*/3", "2-11/4", "jan,jul"],
    ["*", "?", "0", "1", "6", "mon-fri", "SAT,sun", "*/2", "1-5/2", "0,6"],
]


def valid_schedule(rng: random.Random) -> str:
    return " ".join(",".join(rng.sample(field, rng.choice([1, 1, 2]))) for field in VALID)


def main() -> None:
    rng = random.Random(39)
    corpus = list(HAND)
    seen = set(corpus)
    while len(corpus) < 1500:
        schedule = valid_schedule(rng) if rng.random() < 0.6 else random_schedule(rng)
        if schedule not in seen:
            seen.add(schedule)
            corpus.append(schedule)
    print(json.dumps(corpus, ensure_ascii=True, indent=0))


if __name__ == "__main__":
    main()
