// chan: the `kotlin` row of the `chan` scenario (bench/scenarios.md), kotlinx.coroutines Channel on the
// JVM. Prints one CSV row: program,etype,worker,event,time,speed,channel_bytes,task_bytes
//
// Usage: java -jar chan-jar-with-dependencies.jar -w W -e E [-q Q] [-t int|str|str_ptr|str_clone] [-s S] [--warmup N]
//
// The scenario runs in runBlocking(Dispatchers.Default), so every coroutine runs on the default
// dispatcher's pool (one thread per core, at least two). As the original does, the JVM is warmed up
// first: the whole cell runs N times (default 1) untimed, then once more timed.
package dev.corio.bench.chan

import java.util.Locale
import java.util.concurrent.atomic.AtomicLong
import java.util.concurrent.atomic.AtomicLongArray
import kotlin.system.exitProcess
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.joinAll
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.yield

/** The event: Kotlin's sum type, a sealed interface. */
sealed interface Event

class IntEvent(val value: Long) : Event

class StrEvent(val value: String) : Event

/** Refers to the one shared string; senders send one shared instance, so it costs no allocation. */
class StrPtrEvent(val value: String) : Event

/** The exit marker every receiver checks for; never sent. */
object ExitEvent : Event

/** The four event types of the scenario (`-t`), resolved from the name once, before the clock, so a
 *  sender's make switches on an enum as the C++ and Rust peers do, not on the name string. */
enum class EventType(val label: String) {
    INT("int"), STR("str"), STR_PTR("str_ptr"), STR_CLONE("str_clone");

    companion object {
        fun parse(name: String): EventType? = entries.firstOrNull { it.label == name }
    }
}

/** Makes the events senders send; `shared` is the one string of S characters, built before the clock. */
class Source(private val etype: EventType, size: Int) {
    private val shared = "x".repeat(size)
    private val sharedRef = StrPtrEvent(shared)

    /** An int carries i; str is the JVM's ordinary string copy (the reference: strings are immutable),
     *  in a new event; str_ptr is the one event referring to the shared string; str_clone copies the
     *  characters into a new String. */
    fun make(i: Int): Event = when (etype) {
        EventType.INT -> IntEvent(i.toLong())
        EventType.STR -> StrEvent(shared)
        EventType.STR_PTR -> sharedRef
        EventType.STR_CLONE -> StrEvent(String(shared.toCharArray()))
    }
}

class Params(val workers: Int, val events: Int, val capacity: Int, val etype: String, val type: EventType, val size: Int,
             val warmups: Int)

class Outcome(val seconds: Double, val counted: Long, val channelBytes: Double, val taskBytes: Double)

fun fail(why: String): Nothing {
    System.err.println("self-check failed: $why")
    exitProcess(1)
}

private val OPTIONS = setOf("w", "e", "q", "t", "s", "warmup")

fun parse(args: Array<String>): Params {
    val values = HashMap<String, String>()
    var i = 0
    while (i < args.size) {
        val name = args[i].trimStart('-')
        if (!args[i].startsWith("-") || name !in OPTIONS) fail("unknown option: ${args[i]}")
        if (i + 1 >= args.size) fail("missing value for ${args[i]}")
        values[name] = args[i + 1]
        i += 2
    }
    fun number(name: String, fallback: Int): Int {
        val raw = values[name] ?: return fallback
        return raw.replace("_", "").replace(",", "").toIntOrNull() ?: fail("-$name wants a number, got $raw")
    }
    val etype = values["t"] ?: "int"
    val type = EventType.parse(etype)
    val p = Params(number("w", 0), number("e", 0), number("q", 256), etype, type ?: EventType.INT, number("s", 16),
        number("warmup", 1))
    if (p.workers <= 0 || p.events <= 0 || p.capacity <= 0 || p.size < 0 || p.warmups < 0) {
        fail("-w, -e and -q must be positive; -s and --warmup not negative")
    }
    if (type == null) fail("unknown -t $etype (int, str, str_ptr or str_clone)")
    return p
}

/** Live heap bytes after a full collection: the JVM's counterpart of resident memory (see scenarios.md). */
fun liveHeapBytes(): Long {
    val runtime = Runtime.getRuntime()
    System.gc()
    return runtime.totalMemory() - runtime.freeMemory()
}

/** Where the counter sits in its AtomicLongArray: 16 unused longs (128 bytes) on each side keep the
 *  128-byte aligned pair of lines around it free of anything else (array header included), wherever
 *  the JVM puts the array, as corio's counter sits on lines of its own. A plain AtomicLong is a 24-byte
 *  object the allocator packs next to whatever comes before or after it (and a collection may move
 *  it next to the Source senders read per event); JDK 17 offers @Contended only with
 *  -XX:-RestrictContended, so the padding is the array's. */
private const val COUNTER = 16

/** One run of the cell: W channels and receivers, then (clock) W senders, until every receiver finished. */
fun runCell(p: Params, source: Source): Outcome = runBlocking(Dispatchers.Default) {
    val counter = AtomicLongArray(2 * COUNTER + 1) // the counter is element COUNTER, the rest is padding
    val waiting = AtomicLong() // receivers that reached their first receive; it only gates the clock
    val before = liveHeapBytes()
    val channels = Array(p.workers) { Channel<Event>(p.capacity) }
    val withChannels = liveHeapBytes()
    val receivers = channels.map { channel ->
        launch {
            waiting.incrementAndGet()
            repeat(p.events) {
                val received = channel.receive()
                counter.incrementAndGet(COUNTER)
                if (received === ExitEvent) return@launch
            }
        }
    }
    while (waiting.get() < p.workers) yield()
    val withReceivers = liveHeapBytes()

    val start = System.nanoTime()
    val senders = channels.map { channel ->
        launch {
            for (i in 0 until p.events) channel.send(source.make(i))
        }
    }
    receivers.joinAll()
    val seconds = (System.nanoTime() - start) / 1e9
    senders.joinAll()
    Outcome(seconds, counter.get(COUNTER), (withChannels - before).toDouble() / p.workers,
        (withReceivers - withChannels).toDouble() / p.workers)
}

fun main(args: Array<String>) {
    val p = parse(args)
    val source = Source(p.type, p.size)
    val expected = p.workers.toLong() * p.events
    repeat(p.warmups) {
        val warm = runCell(p, source)
        if (warm.counted != expected) fail("warm-up counted ${warm.counted} events, expected W*E = $expected")
    }
    val result = runCell(p, source)
    if (result.counted != expected) {
        fail("counted ${result.counted} events, expected W*E = $expected (lost, extra or exit-marker events)")
    }
    if (!result.seconds.isFinite() || result.seconds <= 0) fail("elapsed time is not finite and positive")
    println(String.format(Locale.ROOT, "kotlin,%s,%d,%d,%.6f,%.0f,%.0f,%.0f", p.etype, p.workers, p.events,
        result.seconds, expected / result.seconds, result.channelBytes, result.taskBytes))
}
