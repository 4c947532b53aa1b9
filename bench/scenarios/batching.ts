import type { BenchEnv, ScenarioReport } from '../lib/env.js';

export async function batching(_env: BenchEnv): Promise<ScenarioReport> {
  return { id: 6, title: 'Batching', markdown: 'not yet written', targets: [] };
}
