// HiveServer2's TCLIService (Apache Hive's TCLIService.thrift, included
// unchanged) with HatRPC hints: the same functions, names and types, so
// every HiveServer2 client talks to it as to the plain one.
//
// The service-level group is the paper's "HatRPC-Service" configuration
// (server.WithServiceLevelHints / client.WithServiceLevelHints plan every
// function from it alone); with the function-level groups it is
// "HatRPC-Function". Transport stays auto: the runtime moves calls onto
// shm (or RDMA) lanes when both peers enable them, else they stay on TCP.
namespace go hs2

include "TCLIService.thrift"

service TCLIService {
  // Most bytes a HiveServer2 moves are result pages.
  hint: perf_goal = throughput;

  TCLIService.TOpenSessionResp OpenSession(1: TCLIService.TOpenSessionReq req),
  TCLIService.TCloseSessionResp CloseSession(1: TCLIService.TCloseSessionReq req),
  TCLIService.TGetInfoResp GetInfo(1: TCLIService.TGetInfoReq req) [ hint: perf_goal = latency; c_hint: idempotent = on; ]

  // A statement's wall time is the query's: a small request, a short reply
  // after a long wait, so the caller waits blocked instead of spinning.
  TCLIService.TExecuteStatementResp ExecuteStatement(1: TCLIService.TExecuteStatementReq req) [ hint: perf_goal = res_util, polling = event; ]

  TCLIService.TGetTypeInfoResp GetTypeInfo(1: TCLIService.TGetTypeInfoReq req),
  TCLIService.TGetCatalogsResp GetCatalogs(1: TCLIService.TGetCatalogsReq req),
  TCLIService.TGetSchemasResp GetSchemas(1: TCLIService.TGetSchemasReq req),
  TCLIService.TGetTablesResp GetTables(1: TCLIService.TGetTablesReq req),
  TCLIService.TGetTableTypesResp GetTableTypes(1: TCLIService.TGetTableTypesReq req),
  TCLIService.TGetColumnsResp GetColumns(1: TCLIService.TGetColumnsReq req),
  TCLIService.TGetFunctionsResp GetFunctions(1: TCLIService.TGetFunctionsReq req),
  TCLIService.TGetPrimaryKeysResp GetPrimaryKeys(1: TCLIService.TGetPrimaryKeysReq req),
  TCLIService.TGetCrossReferenceResp GetCrossReference(1: TCLIService.TGetCrossReferenceReq req),

  // Polled in a loop while a statement runs: tiny messages, latency first.
  TCLIService.TGetOperationStatusResp GetOperationStatus(1: TCLIService.TGetOperationStatusReq req) [ hint: perf_goal = latency, polling = busy, payload_size = 256; c_hint: idempotent = on; ]

  TCLIService.TCancelOperationResp CancelOperation(1: TCLIService.TCancelOperationReq req),
  TCLIService.TCloseOperationResp CloseOperation(1: TCLIService.TCloseOperationReq req),
  TCLIService.TGetResultSetMetadataResp GetResultSetMetadata(1: TCLIService.TGetResultSetMetadataReq req) [ hint: perf_goal = latency; c_hint: idempotent = on; ]

  // Result pages: the bulk of the bytes; large replies use the hybrid
  // eager/rendezvous protocol.
  TCLIService.TFetchResultsResp FetchResults(1: TCLIService.TFetchResultsReq req) [ hint: perf_goal = throughput, protocol = hybrid; s_hint: payload_size = 256KiB; ]

  TCLIService.TGetDelegationTokenResp GetDelegationToken(1: TCLIService.TGetDelegationTokenReq req),
  TCLIService.TCancelDelegationTokenResp CancelDelegationToken(1: TCLIService.TCancelDelegationTokenReq req),
  TCLIService.TRenewDelegationTokenResp RenewDelegationToken(1: TCLIService.TRenewDelegationTokenReq req),
}
