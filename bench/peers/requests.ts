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

/**
 * The subscription scenarios 5 and 7 open on Hive Gateway's webhook peer (bench/peers/hive-webhooks.ts). Its
 * event is the webhook body as sent (snake_case); the aliases give the load generator the members it reads
 * in the gateway's events (`authReqId`, and `correlationId` for scenario 5's clock).
 */
export const HIVE_MOBILE_ID_SUBSCRIPTION = `subscription($authReqId: String!) {
  mobileIdNotification(authReqId: $authReqId) { authReqId: auth_req_id correlationId: correlation_id error }
}`;
