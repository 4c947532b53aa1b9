/** Latency samples in milliseconds, summarised. */
export interface LatencySummary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}

/** A growable array of float samples that does not box every number. */
export class Samples {
  private data = new Float64Array(1 << 16);
  private size = 0;

  push(value: number): void {
    if (this.size === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.size++] = value;
  }

  values(): number[] {
    return Array.from(this.data.subarray(0, this.size));
  }

  summary(): LatencySummary {
    return summarize(this.data.subarray(0, this.size));
  }
}

/** Nearest-rank percentiles (no interpolation: every reported figure is a latency that was observed). */
export function summarize(values: Float64Array | number[]): LatencySummary {
  const sorted = Float64Array.from(values).sort();
  const n = sorted.length;
  if (n === 0) return { count: 0, mean: NaN, p50: NaN, p90: NaN, p95: NaN, p99: NaN, max: NaN };
  const at = (q: number) => sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]!;
  let sum = 0;
  for (const v of sorted) sum += v;
  return { count: n, mean: sum / n, p50: at(0.5), p90: at(0.9), p95: at(0.95), p99: at(0.99), max: sorted[n - 1]! };
}

export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export const fmt = {
  int: (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a'),
  ms: (v: number) => (Number.isFinite(v) ? (Math.abs(v) < 10 ? v.toFixed(2) : v.toFixed(1)) : 'n/a'),
  ratio: (v: number) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a'),
  pct: (v: number) => (Number.isFinite(v) ? `${Math.round(v * 100)}%` : 'n/a'),
  kb: (bytes: number) => (Number.isFinite(bytes) ? `${(bytes / 1024).toFixed(1)} KB` : 'n/a'),
  mb: (bytes: number) => (Number.isFinite(bytes) ? `${(bytes / 2 ** 20).toFixed(1)} MB` : 'n/a'),
};
