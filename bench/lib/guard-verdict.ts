/**
 * `npm run bench:guard`'s verdict on one path, from its measured rounds (decisions 084 and 114): the median of the
 * per-round ratios (working tree over ref, both sides measured in the same moments), its spread, and whether that
 * reads slower (more than the tolerance, 2 %, beyond the spread), the same (a 5 % loss ruled out: the ratio plus the
 * spread under 1.05), or neither: no verdict.
 */
import { median } from './stats.js';

/** One measured round of a path: each side's µs per operation, and which pair of processes ran it. */
export interface Figures {
  tree: number;
  ref: number;
  pair: number;
}

export interface GuardRow {
  path: string;
  /** µs per operation, median of the rounds. */
  refUs: number;
  treeUs: number;
  ratio: number;
  /** The larger of the rounds' and the pairs' half range. */
  spread: number;
  /** The ratio exceeds 1 by more than the spread plus the tolerance. */
  slower: boolean;
  /** Neither slower nor the same (the ratio plus the spread not under 1 + `sees`): no verdict. */
  unresolved: boolean;
  refRounds: number[];
  treeRounds: number[];
  /** Each pair of processes' median ratio. */
  pairRatios: number[];
}

export interface VerdictRule {
  /** Pairs of processes a side: rounds go to them in turn. */
  pairs: number;
  /** A path is slower when its ratio exceeds 1 by more than its spread plus this. */
  tolerance: number;
  /** The loss a verdict of "same" rules out: the ratio plus the spread stays under 1 + this (5 %). */
  sees: number;
}

/** A path's row from its rounds. */
export function rowOf(path: string, byRound: Figures[], rule: VerdictRule): GuardRow {
  const ratios = byRound.map((f) => f.tree / f.ref);
  const ratio = median(ratios);
  // Two spreads, the larger counts: the rounds' (what the moment does) and the pairs' (what a process's luck does:
  // each pair's median ratio).
  const pairRatios = Array.from({ length: rule.pairs }, (_, i) =>
    median(byRound.filter((f) => f.pair === i).map((f) => f.tree / f.ref)),
  );
  const spread = Math.max(halfRange(ratios), halfRange(pairRatios));
  const slower = ratio - 1 > spread + rule.tolerance;
  return {
    path,
    refUs: median(byRound.map((f) => f.ref)),
    treeUs: median(byRound.map((f) => f.tree)),
    ratio,
    spread,
    slower,
    unresolved: !slower && ratio - 1 + spread >= rule.sees,
    refRounds: byRound.map((f) => f.ref),
    treeRounds: byRound.map((f) => f.tree),
    pairRatios,
  };
}

/**
 * Half the range of the per-round ratios; from five rounds on without the highest and the lowest eighth (at least one
 * each way: one odd round in eight, two in sixteen).
 */
export function halfRange(ratios: number[]): number {
  const sorted = [...ratios].sort((a, b) => a - b);
  const trim = sorted.length >= 5 ? Math.max(1, Math.floor(sorted.length / 8)) : 0;
  const kept = sorted.slice(trim, sorted.length - trim);
  return (kept[kept.length - 1]! - kept[0]!) / 2;
}
