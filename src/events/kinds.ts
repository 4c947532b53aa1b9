/**
 * The kinds of events in the log, one per stream a domain owns. The domains publish under them, and MCP's resources
 * name them: one list, so that a resource and its events cannot drift apart.
 */
export const EVENT_KINDS = {
  verification: 'verification',
  identification: 'identification',
  mobileId: 'mobile-id',
  provisioning: 'provisioning',
} as const;
