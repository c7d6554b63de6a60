#@ Print the server's kubeconfig (stdout is the output) with the API address of the server host.
sed 's#https://127.0.0.1:@port@#https://@address@:@port@#' @kubeconfig@
