/**
 * `npm run bench:guard`'s verdict on one path, from its measured rounds (decisions 084, 114 and 125): the trimmed
 * mean of the per-round ratios (working tree over ref, both sides measured in the same moments), its standard error,
 * its spread (twice that error, or the pairs' half range if wider), and whether that reads slower (more than the
 * tolerance, 2 %, beyond the spread), the same (a 5 % loss ruled out: the ratio plus the spread under 1.05), or
 * neither: no verdict. The spread narrows as rounds are added, so more rounds can turn no verdict into one.
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
  /** The mean of the per-round ratios without the highest and the lowest eighth (see `trimmed`). */
  ratio: number;
  /** The ratio's standard error (see `standardError`): how far its rounds leave it from the ratio they measure. */
  error: number;
  /** The larger of twice `error` and the pairs' half range. */
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
  const ratio = trimmedMean(ratios);
  const error = standardError(ratios);
  // Two spreads, the larger counts: the rounds' (what the moment does: twice the ratio's standard error, about the
  // kept rounds' half range for eight rounds, narrower as rounds are added) and the pairs' (what a process's luck
  // does: each pair's median ratio).
  const pairRatios = Array.from({ length: rule.pairs }, (_, i) =>
    median(byRound.filter((f) => f.pair === i).map((f) => f.tree / f.ref)),
  );
  const spread = Math.max(2 * error, halfRange(pairRatios));
  const slower = ratio - 1 > spread + rule.tolerance;
  return {
    path,
    refUs: median(byRound.map((f) => f.ref)),
    treeUs: median(byRound.map((f) => f.tree)),
    ratio,
    error,
    spread,
    slower,
    unresolved: !slower && ratio - 1 + spread >= rule.sees,
    refRounds: byRound.map((f) => f.ref),
    treeRounds: byRound.map((f) => f.tree),
    pairRatios,
  };
}

/**
 * Whether a path's rounds are enough: a slower verdict stands however wide they are; any other wants a verdict (not
 * unresolved) and a standard error of at most `precision`, so that the same tree reads within the tolerance of 1 on
 * a noisy host too, from more rounds. What stops the rounds is their spread, never how near 1 they read.
 */
export function settled(row: Pick<GuardRow, 'slower' | 'unresolved' | 'error'>, precision: number): boolean {
  return row.slower || (!row.unresolved && row.error <= precision);
}

/**
 * The ratios sorted, and how many are dropped each way: from five rounds on, the highest and the lowest eighth, at
 * least one each way (one odd round in eight, two in sixteen).
 */
function trimmed(ratios: number[]): { sorted: number[]; trim: number } {
  const sorted = [...ratios].sort((a, b) => a - b);
  return { sorted, trim: sorted.length >= 5 ? Math.max(1, Math.floor(sorted.length / 8)) : 0 };
}

/**
 * The mean of the ratios without the trimmed ones: an odd round weighs nothing, as in a median, and the others all
 * count (a median of eight reads only the middle two: over 40,000 simulated sets of normal rounds it wandered 12 %
 * further than this, 16 % in sets of sixteen).
 */
export function trimmedMean(ratios: number[]): number {
  const { sorted, trim } = trimmed(ratios);
  const kept = sorted.slice(trim, sorted.length - trim);
  return kept.reduce((a, b) => a + b, 0) / kept.length;
}

/**
 * The trimmed mean's standard error (Tukey and McLaughlin): the standard deviation of the ratios with each trimmed
 * one set to the nearest kept one, over the kept share of the rounds times the square root of their number.
 * Infinite for a single round.
 */
export function standardError(ratios: number[]): number {
  const { sorted, trim } = trimmed(ratios);
  const n = sorted.length;
  if (n < 2) return Number.POSITIVE_INFINITY;
  const winsorized = sorted.map((r, i) => sorted[Math.min(n - 1 - trim, Math.max(trim, i))] ?? r);
  const mean = winsorized.reduce((a, b) => a + b, 0) / n;
  const sd = Math.sqrt(winsorized.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1));
  return sd / (((n - 2 * trim) / n) * Math.sqrt(n));
}

/** Half the range of the ratios, without the trimmed ones (of the pairs' four, none). */
export function halfRange(ratios: number[]): number {
  const { sorted, trim } = trimmed(ratios);
  const kept = sorted.slice(trim, sorted.length - trim);
  return (kept[kept.length - 1]! - kept[0]!) / 2;
}
