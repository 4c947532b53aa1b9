import type { GraphiqlExample } from './graphiql.js';

/**
 * The saved operations GraphiQL opens with: the main flows of the gateway, runnable as they are against
 * the sandbox. The page puts each title on a `#` first line (GraphiQL names tabs after operations).
 */
export function graphiqlExamples(options: {
  sandbox: boolean;
  /**
   * The sandbox's client_notification_token, when the page may show it: only while the API is open (without API
   * keys anyone may issue a token anyway). With keys the page is public, so it says where the token is instead.
   */
  notificationToken?: string | null;
  /** The gateway's address, for the curl line. */
  url?: string;
}): GraphiqlExample[] {
  const examples: GraphiqlExample[] = [
    {
      title: 'Create the Kafka chain',
      query: `# project → network → subnet → IP → cluster → topic → user, in one call.
# Each step is an idempotent cloud mutation; run it again with the same key to resume after a failure.
mutation ProvisionKafka($key: UUID) {
  provisionKafkaCluster(
    idempotencyKey: $key
    input: {
      project: { name: "demo", description: "made in GraphiQL" }
      network: { title: "demo-net", bandwidthMbps: 100 }
      subnet: { title: "demo-subnet", cidr: "10.20.0.0/24" }
      ipAddress: { title: "demo-public-ip" }
      cluster: { title: "demo-kafka", instanceType: C2_MEDIUM, instanceCount: 3 }
      topics: [{ name: "orders", partitions: 3, replicationFactor: 3, minInsyncReplicas: 2 }]
      users: [{ name: "orders-app", password: "change-me-Str0ng" }]
    }
  ) {
    idempotencyKey
    replayed
    provisioning { id state steps { name state resourceId } }
  }
}
`,
      variables: '{}',
    },
    {
      title: 'Plan the Kafka chain (no upstream call)',
      query: `# The exact requests provisionKafkaCluster would send for this input, in order: method, path, headers
# (token masked), body (passwords masked), the defaults applied, reused steps and every validation error.
# Nothing is sent and nothing is stored. Try a bad cidr or replicationFactor: 5 to see the errors per step.
query PlanKafka($key: UUID) {
  planKafkaCluster(
    idempotencyKey: $key
    input: {
      project: { name: "demo", description: "made in GraphiQL" }
      network: { title: "demo-net", bandwidthMbps: 100 }
      subnet: { title: "demo-subnet", cidr: "10.20.0.0/24" }
      ipAddress: { title: "demo-public-ip" }
      cluster: { title: "demo-kafka", instanceType: C2_MEDIUM, instanceCount: 3 }
      topics: [{ name: "orders", partitions: 3, replicationFactor: 3, minInsyncReplicas: 2 }]
      users: [{ name: "orders-app", password: "change-me-Str0ng" }]
    }
  ) {
    valid
    errors { field message }
    defaults { field value }
    references { placeholder step value }
    steps {
      name
      action
      resourceId
      errors { field code message }
      request { method path headers { name value } body }
    }
  }
}
`,
      variables: '{\n  "key": "3fa85f64-5717-4562-b3fc-2c963f66afa6"\n}',
    },
    {
      title: 'Query a project tree',
      query: `# Everything the gateway created, answered from its ledger (one SQL query per level).
query Projects {
  projects(first: 10) {
    id
    name
    createdAt
    networks { id title subnets { id cidr } ipAddresses { id address } }
    kafkaClusters { id title instanceType publicIp topics { name partitions } users { name } }
    virtualMachines { id title platform instanceType bootDisk { image sizeGb iops } }
  }
}
`,
    },
    {
      title: 'Create one network',
      query: `# A single cloud mutation with an idempotency key: run it twice and the second answer says replayed: true.
mutation CreateNetwork($projectId: UUID!, $key: UUID) {
  createNetwork(input: { projectId: $projectId, title: "my-network", bandwidthMbps: 200 }, idempotencyKey: $key) {
    network { id title bandwidthMbps defaultFirewallAction }
    idempotencyKey
    replayed
  }
}
`,
      variables:
        '{\n  "projectId": "<a project id from the Projects tab>",\n  "key": "3fa85f64-5717-4562-b3fc-2c963f66afa6"\n}',
    },
    {
      title: 'Create an identification link',
      query: `# An identification link for an end user (202 from the identification service).
mutation CreateIdentification {
  createIdentification(input: { workflowId: "onboarding", applicantExternalId: "customer-42", linkLifetimeInMinutes: 60, redirectUrl: "https://example.com/done" }) {
    identification { id idShort url expiresAt }
    idempotencyKey
    replayed
  }
}
`,
    },
    {
      title: 'Wait for a mobile-ID result',
      query: `# Subscribe first (run this tab), then ${
        options.sandbox
          ? 'complete the authentication from the next tab.'
          : "the mobile identity service's notification for this auth_req_id ends it."
      }
# GraphiQL streams it over WebSocket; an app without one gets the same stream over Server-Sent Events:
# POST this document to /graphql/stream with Accept: text/event-stream (or use graphql-sse's client).
subscription WaitForMobileId {
  mobileIdAuthentication(authReqId: "demo-auth-req-1") {
    __typename
    ... on MobileIdAuthenticated { authReqId subject acr amr expiresAt receivedAt }
    ... on MobileIdAuthenticationFailed { authReqId error errorDescription reason receivedAt }
  }
}
`,
    },
    {
      title: 'Refused mobile-ID notifications',
      query: `# The quarantine: every notification the webhook refused, without secrets. The sender does not retry,
# so each row is a lost authentication. Operator keys see every row; an app's key those on tokens it issued.
query MobileIdRejections {
  mobileIdRejections(first: 20) { receivedAt authReqId httpStatus reason description requestId transactionId }
}
`,
    },
  ];
  if (options.sandbox) {
    const token = options.notificationToken
      ? `# Or post a notification yourself with the sandbox's client_notification_token (a secret of this data directory;
# its results are every app's to read):
#   curl -i ${options.url ?? 'http://localhost:4000'}/webhooks/mobile-id -H 'authorization: Bearer ${options.notificationToken}' \\
#     -H 'content-type: application/json' -d '{"auth_req_id":"demo-auth-req-1","error":"access_denied","error_description":"refused"}'`
      : `# The sandbox's own client_notification_token (a secret of this data directory) is on the gateway's start-up line.`;
    // Right after the tab that waits, which sends the reader to the next tab.
    const wait = examples.findIndex((e) => e.title === 'Wait for a mobile-ID result');
    examples.splice(wait + 1, 0, {
      title: 'Trigger the mobile-ID result (sandbox)',
      query: `# Sandbox only: the simulated mobile identity service POSTs a signed notification to this gateway, on a
# client_notification_token issued for your API key (the result is yours alone).
${token}
mutation CompleteMobileId {
  sandboxCompleteMobileIdAuthentication(authReqId: "demo-auth-req-1", outcome: SUCCESS) {
    authReqId
    outcome
    httpStatus
    accepted
  }
}
`,
    });
  }
  return examples;
}

export const DEFAULT_QUERY = `# Welcome to the gateway. The tabs above hold the main flows; the docs pane (top left) is the manual.
query Catalog {
  catalog {
    kafkaInstanceTypes { name cpu ramGb }
    images { name title imageId }
  }
}
`;
