# Starts the Redis behind Ray's GCS (gcs-redis.yaml). The password arrives from the pod's
# Secret as REDIS_PASSWORD and goes into a 0600 file in memory that gcs-redis.conf includes:
# never on a command line, never in a manifest.
set -e
if [ -z "$REDIS_PASSWORD" ] || [ "$REDIS_PASSWORD" = "REPLACE-ME-see-docs-cluster-md" ]; then
  echo "$HOSTNAME: the Secret zeroforge-gcs-redis holds no password or still the placeholder (docs/cluster.md)" >&2
  exit 1
fi
umask 077
printf 'requirepass "%s"\n' "$REDIS_PASSWORD" > /run/redis-auth/auth.conf
unset REDIS_PASSWORD
exec redis-server /etc/redis/gcs-redis.conf
