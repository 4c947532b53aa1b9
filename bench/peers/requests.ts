/** What the load generator sends to the peers: no peer code here, so the orchestrator stays light. */

/**
 * The request the load generator sends to Hive Gateway: the same upstream call as the gateway's
 * createNetwork (POST /ocs/v1/services with the envelope, the bearer token and a fresh Idempotency-Key),
 * in the shape the OpenAPI-generated schema has: the caller sends the envelope itself.
 */
export const HIVE_CREATE_NETWORK =
  'mutation($input: ServiceEnvelope_Input, $key: UUID!) { createService(Idempotency_Key: $key, input: $input) { id metadata { title } } }';

export function hiveMutationBody(projectId: string): string {
  const input = {
    platform: { productCode: 'network', regionCode: 'msk' },
    kind: 'network',
    metadata: { title: 'bench-net', description: '' },
    projectId,
    spec: { vendor_extensions_network: { bandwidth_mbps: 100, default_gfw_rule_action: 'allow' } },
    zoneCode: 'msk-avntg',
  };
  return JSON.stringify({ query: HIVE_CREATE_NETWORK, variables: { input, key: '{{uuid}}' } });
}
