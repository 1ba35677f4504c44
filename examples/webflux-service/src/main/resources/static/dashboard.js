// The Durable dashboard: plain JavaScript, no build step. It reads the JSON endpoints of
// DurableController, refreshes them when events arrive (at most every 500 ms), and shows the
// live feed from the Server-Sent-Events endpoint.
'use strict';

const STATUSES = ['runnable', 'executing', 'awaiting_signal', 'awaiting_children', 'done', 'failed', 'cancelled'];
const FEED_LIMIT = 200;

const $ = (selector) => document.querySelector(selector);

function cell(text, className) {
  const td = document.createElement('td');
  td.textContent = text == null ? '' : String(text);
  if (className) td.className = className;
  return td;
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const json = text ? JSON.parse(text) : null;
  if (!response.ok) {
    throw new Error((json && (json.detail || json.title)) || response.statusText);
  }
  return json;
}

async function refreshQueues() {
  const queues = await api('GET', '/api/dashboard/queues');
  const body = $('#queues tbody');
  body.replaceChildren(...queues.map((queue) => {
    const tr = document.createElement('tr');
    tr.dataset.queue = queue.queue;
    tr.append(cell(queue.queue));
    for (const status of STATUSES) {
      const td = cell(queue.counts[status] || 0, 'num');
      td.dataset.status = status;
      if (status === 'done' && queue.doneEstimated) {
        td.title = 'estimated from a sample of the history';
      }
      tr.append(td);
    }
    return tr;
  }));
}

function actionButton(label, className, onClick) {
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = label;
  button.className = className;
  button.addEventListener('click', onClick);
  return button;
}

async function refreshInstances() {
  const instances = await api('GET', '/api/dashboard/instances?limit=30');
  const body = $('#instances tbody');
  body.replaceChildren(...instances.map((instance) => {
    const tr = document.createElement('tr');
    tr.dataset.id = instance.id;
    tr.dataset.status = instance.status;
    tr.append(cell(instance.id), cell(instance.type), cell(instance.queue),
      cell(instance.status, 'status-' + instance.status), cell(instance.step),
      cell(instance.attempt + '/' + instance.maxAttempts, 'num'));
    const error = cell(instance.lastError, 'error');
    error.title = instance.lastError || '';
    tr.append(error);
    const actions = document.createElement('td');
    if (['runnable', 'executing', 'awaiting_signal', 'awaiting_children'].includes(instance.status)) {
      actions.append(actionButton('cancel', 'cancel', () => act('POST', `/api/instances/${instance.id}/cancel`)));
    }
    if (instance.status === 'failed' || instance.status === 'cancelled') {
      actions.append(actionButton('retry', 'retry', () => act('POST', `/api/instances/${instance.id}/retry`)));
    }
    tr.append(actions);
    return tr;
  }));
}

async function act(method, path) {
  try {
    await api(method, path);
  } catch (error) {
    showResult(error.message, true);
  }
  scheduleRefresh();
}

let refreshTimer = null;
function scheduleRefresh() {
  // Events can come in thousands a second: coalesce them into one refresh per 500 ms.
  if (refreshTimer) return;
  refreshTimer = setTimeout(async () => {
    refreshTimer = null;
    try {
      await Promise.all([refreshQueues(), refreshInstances()]);
    } catch (error) {
      console.warn('refresh failed', error);
    }
  }, 500);
}

function showResult(text, isError, id) {
  const output = $('#insert-result');
  output.textContent = text;
  output.className = isError ? 'error' : '';
  if (id !== undefined) output.dataset.id = id; else delete output.dataset.id;
}

$('#insert-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const type = $('#type').value;
  let value = null;
  const raw = $('#args').value.trim();
  if (raw) {
    try {
      value = JSON.parse(raw);
    } catch (error) {
      showResult('arguments must be JSON, e.g. "ada" or {"item": "book"}', true);
      return;
    }
  }
  const workflow = type === 'order';
  const body = { type, [workflow ? 'state' : 'args']: value };
  if ($('#queue').value.trim()) body.queue = $('#queue').value.trim();
  try {
    const inserted = await api('POST', workflow ? '/api/workflows' : '/api/jobs', body);
    showResult(`inserted #${inserted.id}`, false, inserted.id);
  } catch (error) {
    showResult(error.message, true);
  }
  scheduleRefresh();
});

$('#type').addEventListener('change', () => {
  $('#args').value = $('#type').value === 'order' ? '{"item": "book"}' : '"ada"';
});

function addToFeed(event) {
  const li = document.createElement('li');
  li.dataset.id = event.id;
  li.dataset.kind = event.kind;
  const kind = document.createElement('span');
  kind.className = 'kind kind-' + event.kind;
  kind.textContent = event.kind;
  const time = event.at.substring(11, 23);
  const text = ` #${event.id} ${event.type || ''} @${event.queue}` + (event.step ? ` step ${event.step}` : '')
    + (event.durationMs != null ? ` ${event.durationMs} ms` : '') + (event.error ? ` — ${event.error}` : '');
  li.append(document.createTextNode(time + ' '), kind, document.createTextNode(text));
  const feed = $('#feed');
  feed.prepend(li);
  while (feed.childElementCount > FEED_LIMIT) feed.lastElementChild.remove();
}

function connect() {
  // EventSource reconnects by itself after an error; the badge shows the state.
  const source = new EventSource('/api/events');
  source.onopen = () => { $('#connection').textContent = 'live'; $('#connection').className = 'badge on'; };
  source.onerror = () => { $('#connection').textContent = 'reconnecting…'; $('#connection').className = 'badge off'; };
  source.addEventListener('job', (message) => {
    addToFeed(JSON.parse(message.data));
    scheduleRefresh();
  });
}

connect();
scheduleRefresh();
setInterval(scheduleRefresh, 5000);
