import type { BenchEnv, ScenarioReport } from '../lib/env.js';

export async function fanout(_env: BenchEnv): Promise<ScenarioReport> {
  return { id: 5, title: 'Fan-out', markdown: 'not yet written', targets: [] };
}
