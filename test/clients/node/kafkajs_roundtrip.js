// kafkajs against Runnel: an idempotent producer, group consumers, transactions.
//
//   node kafkajs_roundtrip.js produce BOOTSTRAP TOPIC N
//       an idempotent producer (idempotent: true, acks=-1, maxInFlightRequests 1 as kafkajs
//       requires) sends values "n/0".."n/N-1" in batches of 100; prints "acked N min A max B",
//       the smallest and largest base offset the acknowledgements carried.
//   node kafkajs_roundtrip.js consume BOOTSTRAP TOPIC GROUP WANT
//       a group consumer (kafkajs's classic protocol, round-robin assignor) reads until it has
//       WANT records or 60 s pass, committing each record it took (autoCommit off, resolving
//       offsets per message), then disconnects (leaving the group); prints
//       "PARTITION OFFSET VALUE" per record. With a fifth argument "read_uncommitted" it reads
//       with that isolation level (kafkajs reads committed records only by default).
//   node kafkajs_roundtrip.js txn BOOTSTRAP TOPIC T
//       a transactional producer (transactionalId, idempotent) runs T transactions of 10
//       values "t/<i>/<j>" each, aborting every third (i % 3 == 1) and committing the others;
//       prints "committed C of N".
// Exits 0 on success, 1 with the reason on stderr.
const { Kafka, logLevel } = require('kafkajs')

function fail (why) {
  console.error('kafkajs_roundtrip: FAIL: ' + why)
  process.exit(1)
}

async function produce (kafka, topic, n) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  let min = Infinity
  let max = -Infinity
  for (let i = 0; i < n; i += 100) {
    const messages = []
    for (let j = i; j < Math.min(n, i + 100); j++) messages.push({ key: String(j), value: 'n/' + j })
    for (const md of await producer.send({ topic, acks: -1, messages })) {
      min = Math.min(min, Number(md.baseOffset))
      max = Math.max(max, Number(md.baseOffset))
    }
  }
  await producer.disconnect()
  console.log('acked ' + n + ' min ' + min + ' max ' + max)
}

async function txn (kafka, topic, transactions) {
  const producer = kafka.producer({ transactionalId: 'kafkajs-txn-' + topic, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  let committed = 0
  for (let i = 0; i < transactions; i++) {
    const tx = await producer.transaction()
    const messages = []
    for (let j = 0; j < 10; j++) messages.push({ value: 't/' + i + '/' + j })
    try {
      await tx.send({ topic, acks: -1, messages })
    } catch (err) {
      await tx.abort()
      throw err
    }
    if (i % 3 === 1) {
      await tx.abort()
    } else {
      await tx.commit()
      committed += messages.length
    }
  }
  await producer.disconnect()
  console.log('committed ' + committed + ' of ' + transactions * 10)
}

async function consume (kafka, topic, group, want, isolation) {
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, readUncommitted: isolation === 'read_uncommitted' })
  const got = []
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  let done
  const finished = new Promise(resolve => { done = resolve })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (got.length >= want) return
      got.push(partition + ' ' + message.offset + ' ' + message.value.toString())
      await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
      if (got.length >= want) done()
    }
  })
  const timer = setTimeout(done, 60000)
  await finished
  clearTimeout(timer)
  await consumer.disconnect()
  for (const line of got) console.log(line)
  if (got.length < want) fail('read ' + got.length + ' of ' + want + ' records')
}

async function main () {
  const [cmd, bootstrap, topic, ...rest] = process.argv.slice(2)
  const kafka = new Kafka({ clientId: 'kafkajs-test', brokers: [bootstrap], logLevel: logLevel.ERROR })
  if (cmd === 'produce') return produce(kafka, topic, Number(rest[0]))
  if (cmd === 'consume') return consume(kafka, topic, rest[0], Number(rest[1]), rest[2])
  if (cmd === 'txn') return txn(kafka, topic, Number(rest[0]))
  fail('usage: produce BOOTSTRAP TOPIC N | consume BOOTSTRAP TOPIC GROUP WANT [read_uncommitted] | txn BOOTSTRAP TOPIC T')
}

main().then(() => process.exit(0), err => fail(err && err.stack ? err.stack : String(err)))
