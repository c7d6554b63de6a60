#@ After deployment, on the k3s server: query every model's /v1/models and print a JSON verdict on
#@ stdout. The API key comes on stdin and reaches curl through a file descriptor, never an argument.
key=$(cat)
verdict=()
check() {
  local name=$1 port=$2 model=$3 ip body
  ip=$(k3s kubectl -n @namespace@ get service "$name" -o jsonpath='{.spec.clusterIP}')
  if body=$(curl -fsS --max-time @timeout@ -H @/dev/fd/3 "http://$ip:$port/v1/models" \
      3<<<"Authorization: Bearer $key") && grep -qF "\"$model\"" <<<"$body"; then
    verdict+=("\"$name\": \"ok\"")
  else
    verdict+=("\"$name\": \"unreachable\"")
  fi
}
@checks@
(IFS=,; printf '{%s}\n' "${verdict[*]}")
