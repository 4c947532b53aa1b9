// Preloaded into a gateway child process (NODE_OPTIONS=--import=…) by test/gateway/stray-rejection.test.ts, when
// STRAY_REJECTION_ON_SIGUSR2 is set: each SIGUSR2 rejects a promise that nothing handles, with an error that holds a
// secret-looking message and a property the log must mask (`token`), as a bug's stray promise would.
if (process.env.STRAY_REJECTION_ON_SIGUSR2) {
  process.on('SIGUSR2', () => {
    void Promise.reject(
      Object.assign(new Error('stray-rejection-marker secret-internal-detail'), { token: 'stray-token-value' }),
    );
  });
}
