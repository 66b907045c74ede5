#!/usr/bin/env python3
"""Per-class within-10% counts parsed from an `lcm calibrate --compare --format md` table.
count_within uses |error| <= 0.10; the md prints error to 0.1 %, so rows printed as +-10.0 % are
ambiguous (listed). Class = the table's class column, plus a 'moe' split (op name L.moe.*)."""
import sys, re, collections
rows = []
for line in open(sys.argv[1]):
    if not line.startswith('| ') or line.startswith('| op ') : continue
    c = [x.strip() for x in line.strip().strip('|').split('|')]
    if len(c) != 6 or not c[5].endswith('%'): continue
    op, cls, shape, meas, pred, err = c
    e = float(err.rstrip('%'))
    if op.startswith('L.moe.'): cls = cls + ' (moe layer)'
    rows.append((op, cls, shape, float(meas), float(pred), e))
tot = collections.Counter(); win = collections.Counter(); amb = collections.defaultdict(list)
for op, cls, shape, m, p, e in rows:
    tot[cls] += 1
    if abs(e) < 9.95: win[cls] += 1
    elif abs(e) < 10.05: amb[cls].append('%s %s %s (meas %.1f pred %.1f -> %+.2f%% from rounded columns)' % (op, shape, '%+.1f%%' % e, m, p, 100*(p/m-1)))
print('| class | points | within 10% (certain) | ambiguous (printed +-10.0%) |')
print('|---|---:|---:|---:|')
for k in sorted(tot):
    print('| %s | %d | %d | %d |' % (k, tot[k], win[k], len(amb[k])))
print('| all | %d | %d | %d |' % (sum(tot.values()), sum(win.values()), sum(len(v) for v in amb.values())))
for k in sorted(amb):
    for a in amb[k]: print('ambiguous [%s]: %s' % (k, a))
