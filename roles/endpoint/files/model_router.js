// The endpoint's model router (nginx's njs, loaded by js_import): with several
// models behind the one endpoint, a request goes to the serving group of the
// model it names. The routes come from the configuration ($endpoint_routes,
// JSON: each served model name and the number of its internal locations
// /_route/N/, /_models/N and /_health/N, which the template writes); this file
// holds no cluster's data. nginx, not this file, talks to the engines.
//
// What a client sees, in the OpenAI API's error shape, as vLLM answers it:
// - a model no group serves: 404 NotFoundError (param: model);
// - no model named while several are served: 400, naming them;
// - a model whose engines are all down or restarting: 503 with Retry-After
//   (nginx's per-model error page), while the other models serve;
// - GET /v1/models: the models whose group answers, merged; 401 as the
//   engines answer it when none accepts the key; 503 when none answers.

function routes(r) {
    return JSON.parse(r.variables.endpoint_routes);
}

// A JSON answer; a 503 says when to retry, as nginx's own error pages do.
function reply(r, status, body) {
    r.headersOut['Content-Type'] = 'application/json';
    if (status === 503) {
        r.headersOut['Retry-After'] = r.variables.endpoint_retry_after;
    }
    r.return(status, JSON.stringify(body) + '\n');
}

function error(r, status, type, message, param) {
    const detail = {message: message, type: type, code: status};
    if (param) {
        detail.param = param;
    }
    reply(r, status, {error: detail});
}

// The model a request names: its JSON body's "model", or, for
// GET /v1/models/NAME, the name in the path. undefined when it names none;
// null when the body is not a JSON object.
function named_model(r) {
    if (r.method === 'GET' || r.method === 'HEAD' || r.method === 'DELETE') {
        const path = r.uri.match(/^\/v1\/models\/(.+)$/);
        return path ? path[1] : undefined;
    }
    let body;
    try {
        body = JSON.parse(r.requestText || '');
    } catch (e) {
        return null;
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
        return null;
    }
    return typeof body.model === 'string' ? body.model : undefined;
}

function route(r) {
    const table = routes(r);
    const names = Object.keys(table);
    if (r.uri === '/v1/models' && (r.method === 'GET' || r.method === 'HEAD')) {
        return list_models(r, table);
    }
    let name = named_model(r);
    if (name === null) {
        return error(r, 400, 'BadRequestError', 'The request body is not a JSON object.');
    }
    if (name === undefined) {
        if (names.length !== 1) {
            return error(r, 400, 'BadRequestError',
                         'Name the model: this endpoint serves ' + names.join(', ') + '.', 'model');
        }
        name = names[0];
    }
    if (!Object.prototype.hasOwnProperty.call(table, name)) {
        return error(r, 404, 'NotFoundError', 'The model `' + name + '` does not exist.', 'model');
    }
    const args = r.variables.args;
    r.internalRedirect('/_route/' + table[name] + r.uri + (args ? '?' + args : ''));
}

// Each model's /v1/models through its own group (the client's Authorization
// header goes with each), merged; a group that does not answer leaves its
// model out.
async function list_models(r, table) {
    const names = Object.keys(table);
    const replies = await Promise.all(names.map(function (name) {
        return r.subrequest('/_models/' + table[name], {method: 'GET'})
            .catch(function () { return null; });
    }));
    const data = [];
    let refused = null;
    replies.forEach(function (answer) {
        if (answer === null) {
            return;
        }
        if (answer.status === 200) {
            try {
                Array.prototype.push.apply(data, JSON.parse(answer.responseText).data || []);
            } catch (e) {
                // An answer that is not the API's list names no model.
            }
        } else if (answer.status === 401 || answer.status === 403) {
            refused = refused || answer;
        }
    });
    if (data.length > 0) {
        return reply(r, 200, {object: 'list', data: data});
    }
    if (refused !== null) {
        r.headersOut['Content-Type'] = 'application/json';
        return r.return(refused.status, refused.responseText);
    }
    return error(r, 503, 'service_unavailable',
                 'No engine is serving right now (restarting or down); retry in '
                 + r.variables.endpoint_retry_after + ' s.');
}

// /health: 200 when every model's group answers its /health, else 503
// naming the models that do not (the status only; no engine's text).
async function health(r) {
    const table = routes(r);
    const names = Object.keys(table);
    const replies = await Promise.all(names.map(function (name) {
        return r.subrequest('/_health/' + table[name], {method: 'GET'})
            .catch(function () { return null; });
    }));
    const down = names.filter(function (name, index) {
        return replies[index] === null || replies[index].status !== 200;
    });
    if (down.length === 0) {
        return r.return(200);
    }
    error(r, 503, 'service_unavailable', 'Not serving: ' + down.join(', ') + '.');
}

export default {route, health};
