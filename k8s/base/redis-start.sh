# Starts one of zeroforge's Redis servers (redis.yaml: the run's; gcs-redis.yaml: Ray's
# GCS). The password arrives from the pod's Secret as REDIS_PASSWORD and goes into a 0600
# file in memory that redis.conf includes: never on a command line, never in a manifest.
set -e
if [ -z "$REDIS_PASSWORD" ] || [ "$REDIS_PASSWORD" = "REPLACE-ME-see-docs-cluster-md" ]; then
  echo "$HOSTNAME: the Secret holds no password or still the placeholder (docs/cluster.md)" >&2
  exit 1
fi
umask 077
printf 'requirepass "%s"\n' "$REDIS_PASSWORD" > /run/redis-auth/auth.conf
unset REDIS_PASSWORD
exec redis-server /etc/redis/redis.conf
