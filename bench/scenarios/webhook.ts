import type { BenchEnv, ScenarioReport } from '../lib/env.js';

export async function webhookIngest(_env: BenchEnv): Promise<ScenarioReport> {
  return { id: 4, title: 'Webhook ingest', markdown: 'not yet written', targets: [] };
}
