import Hummingbird

/// Counts every request by route and status; errors count with the status they answer with.
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            let response = try await next(request, context)
            metrics.request(route: context.endpointPath ?? "unmatched", method: request.method.rawValue, status: response.status.code)
            return response
        } catch let error as any HTTPResponseError {
            metrics.request(route: context.endpointPath ?? "unmatched", method: request.method.rawValue, status: error.status.code)
            throw error
        } catch {
            metrics.request(route: context.endpointPath ?? "unmatched", method: request.method.rawValue, status: 500)
            throw error
        }
    }
}
